package mcpserver

import "github.com/mcp-exec/mcp-exec/launcher/backend"

// The operator's settings tool errors name (through Options.Vars), so that a model
// or a person reading the error knows what the limit is called.
const (
	SettingMaxCodeBytes           backend.Setting = "max-code-bytes"
	SettingMaxStdinBytes          backend.Setting = "max-stdin-bytes"
	SettingEgressProfiles         backend.Setting = "egress-profiles"
	SettingLanguages              backend.Setting = "languages"
	SettingMaxSessions            backend.Setting = "max-sessions"
	SettingMaxSessionsPerIdentity backend.Setting = "max-sessions-per-identity"
	SettingSessionMaxLifetime     backend.Setting = "session-max-lifetime-s"
)
