// Package serve runs a guarded MCP server for real use: over stdio, or
// over Streamable HTTP (stateful, or stateless for replicas behind a load
// balancer) with bearer tokens whose identity becomes the scope and the
// principal of the caller's changes, loopback unless told otherwise, with
// the dashboard beside it, stopping gracefully on SIGINT and SIGTERM.
//
// # A whole server
//
// [Main] is a complete main function; every example server in
// examples/ is one call to it:
//
//	func main() {
//		serve.Main(serve.Program{
//			Name:  "settings",
//			About: "An MCP server with two in-memory settings.",
//			Setup: func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error {
//				changeset.Register(guard, &mcp.Tool{Name: "set_setting"}, setSetting)
//				return nil
//			},
//		})
//	}
//
// It gives the program the flags --ledger, --http, --stateless,
// --auth-token-file, --allow-remote, --allowed-hosts, --dashboard,
// --dashboard-people, --durability, and those of approval: --approval
// token|user|person (--user-approval is another spelling of --approval
// user), --approvers N, --dashboard-url URL, --notify-webhook URL and
// --notify-secret-file FILE (see [Flags]), and a --help text built from
// the Program.
//
// # People approve
//
// With --approval person a named person approves every write as well as
// the agent's token (changeset.PersonApproval): each preview returns a
// link to the approval's page in the dashboard (--dashboard-url, by
// default the dashboard's own address), and the agent's apply waits a
// little for the decision. People decide in the dashboard (signed in with
// --dashboard-people), with `mcp-changeset approve`, or through the
// Guard's Approve and Decline. --notify-webhook tells them something
// waits: a signed POST per event, delivered at least once, from the
// ledger's outbox.
//
// # The pieces
//
// A server that has its own main function takes what it needs:
//
//   - [Stdio]: the stdio transport, which no input line can end (below);
//   - [HTTPHandler]: the Streamable HTTP handler behind a bearer-token
//     check, for a mux of your own, with a bound on the time and the size
//     of each request's body; [Listen] and [RunHTTP] bind loopback and
//     serve it until a context ends, shutting down gracefully, with a
//     bound on the time of each request's headers too (see
//     [HTTPOptions]);
//   - [BearerTokensFromFile]: a file of "TOKEN IDENTITY" lines, whose
//     Verify method is the [HTTPOptions] Verifier; bring your own
//     auth.TokenVerifier to ask an identity provider instead;
//   - [ScopeFromRequest] and [PrincipalFromRequest]: the changeset.Options
//     ScopeFunc and Principal that bind each change to the identity behind
//     the token, so that alice can neither see nor apply bob's changes and
//     the ledger says who did what.
//
// See docs/deploy.md for one host with SQLite, replicas with PostgreSQL
// behind a load balancer, and TLS in front.
//
// # The stdio transport: why not mcp.StdioTransport
//
// The go-sdk's stdio transport (v1.8.0) decodes standard input as one JSON
// stream and treats the first value it cannot turn into a JSON-RPC message
// as the end of the connection: a line of malformed JSON, a line nested
// deeper than its decoder allows, a JSON value that is not an object, a
// message with "jsonrpc":"1.0" or an id of the wrong type. (A line that
// leaves an object open is worse: the decoder reads the following lines
// into it, answering none of them.) The read error
// travels up to the session, which closes, and [mcp.Server.Run] returns
// it, so a server that does what the SDK's examples do exits. One bad
// line, from a buggy client or from a model that was talked into writing
// one, stops every tool the server offers and cancels the calls in flight.
// JSON-RPC 2.0 says such input gets an error response (-32700 parse error,
// -32600 invalid request, with "id": null when the id cannot be known) and
// the server goes on. docs/upstream-go-sdk.md describes the problem for the
// SDK's maintainers.
//
// [LineTransport] reads the stream itself, one newline-delimited line at a
// time, and checks each line before the SDK sees it:
//
//   - a line longer than MaxLineBytes is skipped as it streams past, never
//     buffered whole, and answered with -32600;
//   - a line nested deeper than MaxDepth is answered with -32700; the
//     depth is counted in one pass over the bytes, without recursion;
//   - a line that is not JSON is answered with -32700;
//   - a batch (a JSON array), a value that is not an object and an object
//     that is not a JSON-RPC 2.0 request, notification or response are
//     answered with -32600.
//
// Only a message that the SDK's own decoder accepted reaches the session,
// already decoded, so the SDK has nothing left to fail on. The answers are
// written between the server's own messages, a whole line at a time, and
// the server goes on reading the next line; a call in flight is not
// disturbed. Only the end of input (or a failing read) ends the session, as
// it should.
//
// Use it where a server would use mcp.StdioTransport:
//
//	err := server.Run(ctx, serve.Stdio())
package serve
