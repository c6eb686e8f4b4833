-- 009: intentionally empty. The number was held for the query indexes of
-- issue 28 while another migration took 010; those indexes came as 011.
-- Ledgers already ran this file, so it stays, and does nothing.
SELECT 1;
