package changeset

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPerson_ClaimUsesOnlyItsOwnApproval: a claim that brings the
// approval of another change, or of the undo instead of the apply, is
// refused inside its transaction with nothing written and its token not
// spent; a claim that brings none is refused too; the claim with its own
// approval goes through and spends it.
func TestPerson_ClaimUsesOnlyItsOwnApproval(t *testing.T) {
	ctx := context.Background()
	g, err := New(nil, Options{LedgerPath: filepath.Join(t.TempDir(), "l.db"), WriteMode: WriteGuarded,
		Approval: PersonApproval, ApprovalWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	writes := 0
	Register(g, &mcp.Tool{Name: "bump"}, Operation[struct{ N int }, int, int]{
		AllowEmptyDiff: true,
		Preview: func(_ context.Context, in struct{ N int }) (*Proposal[int], error) {
			return &Proposal[int]{Payload: in.N, Summary: "bump"}, nil
		},
		Apply: func(context.Context, int) (int, error) { writes++; return writes, nil },
	})
	a, err := g.Preview(ctx, "bump", map[string]any{"N": 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Preview(ctx, "bump", map[string]any{"N": 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Approve(ctx, a.Approval.ID, "alice", ""); err != nil {
		t.Fatal(err)
	}
	c, _ := g.get(ctx, b.ChangeID)
	claim := func(id, tok, approval string) error {
		_, err := g.pipe.Apply(ctx, pipeline.Claim{Kind: pipeline.ApplyClaim, ID: id, Token: tok, Auth: pipeline.ByToken,
			Scope: c.ScopeHash, By: "agent", Approval: approval})
		return err
	}
	if err := claim(b.ChangeID, b.ConfirmationToken, a.Approval.ID); !errors.Is(err, ledger.ErrApprovalMismatch) {
		t.Fatalf("b claimed with a's approval: %v, want ErrApprovalMismatch", err)
	}
	if err := claim(b.ChangeID, b.ConfirmationToken, ""); !errors.Is(err, ErrAwaitingApproval) {
		t.Fatalf("b claimed with no approval: %v, want ErrAwaitingApproval", err)
	}
	if st, _ := g.get(ctx, b.ChangeID); writes != 0 || st.Status != ledger.Pending {
		t.Fatalf("%d writes, b %s", writes, st.Status)
	}
	if got, _ := g.ledger.Approval(ctx, a.Approval.ID); got.Status != ledger.ApprovalApproved {
		t.Fatalf("a refused claim moved a's approval to %s", got.Status)
	}
	if err := claim(a.ChangeID, a.ConfirmationToken, a.Approval.ID); err != nil || writes != 1 {
		t.Fatalf("a with its own approval: %v, %d writes", err, writes)
	}
	if err := claim(b.ChangeID, b.ConfirmationToken, a.Approval.ID); !errors.Is(err, ledger.ErrApprovalMismatch) && !errors.Is(err, ledger.ErrApprovalUsed) {
		t.Fatalf("a used approval served again: %v", err)
	}
}
