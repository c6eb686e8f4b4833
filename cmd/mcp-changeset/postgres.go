package main

// The PostgreSQL backend, so that --ledger and MCP_CHANGESET_LEDGER accept
// postgres:// and postgresql:// URLs as well as SQLite file paths.
import _ "github.com/mcp-changeset/changeset-go/ledger/postgres"
