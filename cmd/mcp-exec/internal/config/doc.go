// Package config is mcp-exec's configuration: the table of settings (config.go), each
// with its flag, MCP_EXEC_* variable, default, help and check; loading them from the
// environment and the command line (a flag wins over its variable); validation that
// reports every problem at once, each naming the flag and the variable; the help text;
// the start-up log line, the token redacted (Secret); and the settings table of
// docs/configuration.md (configdoc.go, `go generate ./cmd/mcp-exec`).
//
// The table is the one place a setting's variable is spelled: the libraries name a
// setting by its flag (backend.Setting), and Var gives the command its variable.
package config
