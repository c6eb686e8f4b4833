package exampletest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is the result of a tool call made with Try.
type Outcome struct {
	// Out is the structured result of a call that succeeded.
	Out map[string]any
	// Refusal is the text of the tool error, when the tool refused.
	Refusal string
	// Err is a protocol or transport error: the call did not get an
	// answer at all.
	Err error
}

// Try calls a tool without touching the test, so that it is safe in any
// goroutine (Call and Must fail the test, which only the test's own
// goroutine may do). The caller reports what went wrong.
func (c *Client) Try(name string, args map[string]any) Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return Outcome{Err: fmt.Errorf("%s %s: %w", name, brief(args), err)}
	}
	if res.IsError {
		var texts []string
		for _, content := range res.Content {
			if tc, ok := content.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return Outcome{Refusal: strings.Join(texts, "\n")}
	}
	out := map[string]any{}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return Outcome{Err: fmt.Errorf("%s: decode the result: %w", name, err)}
	}
	return Outcome{Out: out}
}

// Into decodes a successful outcome's result into *into.
func (o Outcome) Into(into any) error {
	b, err := json.Marshal(o.Out)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
