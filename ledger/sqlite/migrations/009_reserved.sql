-- 009: reserved for the query indexes of issue 28 (another branch); this
-- placeholder keeps the numbering whole until that migration replaces it.
SELECT 1;
