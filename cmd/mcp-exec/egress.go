package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/egress"
	"github.com/mcp-exec/mcp-exec/launcher/egress/proxy"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
	"github.com/mcp-exec/mcp-exec/mcpserver"
)

// inContainer reports whether this process runs in a Docker or Podman container.
var inContainer = func() bool {
	for _, p := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// newEgress starts the egress proxy of --egress-profiles, or returns nil without one.
// The sockets' directory is bind-mounted by the engine, which reads the path on its
// own host: so the engine must be local (a unix socket), and a server in a container
// must be told a directory that is the same path in the container and on the host.
// self (launcher.Options.Owner) keeps a live server of the same instance's channels.
func newEgress(cfg config.Config, engineHost string, self owner.ID, log zerolog.Logger) (*proxy.Server, error) {
	if cfg.EgressProfiles == "" {
		return nil, nil
	}
	ps, err := egress.LoadProfiles(cfg.EgressProfiles, config.Secrets())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.Name("egress-profiles"), err)
	}
	if cfg.Backend == "kubernetes" {
		// No socket: the backend carries each pod's connections over port-forward
		// streams to its channel (launcher/kube, egress.go).
		srv, err := proxy.New(ps, "", cfg.Instance, self, log.With().Str("component", "egress").Logger())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", config.Name("egress-profiles"), err)
		}
		if err := egressExtras(srv, cfg); err != nil {
			return nil, err
		}
		log.Info().Strs("profiles", ps.Names()).Strs("inject_hosts", ps.InjectHosts()).Msg("egress profiles loaded (channels over port-forward streams)")
		return srv, nil
	}
	if engineHost != "" && !strings.HasPrefix(engineHost, "unix://") {
		return nil, fmt.Errorf("%s: the engine at %s is not on this machine, and a sandbox's channel is a Unix socket of this machine bind-mounted by the engine: egress profiles need a local engine (unix://)", config.Name("egress-profiles"), engineHost)
	}
	dir := cfg.EgressDir
	if dir == "" {
		if inContainer() {
			return nil, errors.New(config.Name("egress-profiles") + ": the server runs in a container, and the engine bind-mounts a sandbox's channel from a path on its own host: set " + config.Name("egress-dir") + " to a directory mounted at the same path in this container and on the host (docs/egress.md)")
		}
		dir = filepath.Join(os.TempDir(), "mcp-exec-egress-"+cfg.Instance)
	}
	srv, err := proxy.New(ps, dir, cfg.Instance, self, log.With().Str("component", "egress").Logger())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.Name("egress-dir"), err)
	}
	if err := egressExtras(srv, cfg); err != nil {
		return nil, err
	}
	// The hosts with inject rules are the operator's text; the values never are logged.
	log.Info().Strs("profiles", ps.Names()).Strs("inject_hosts", ps.InjectHosts()).Str("dir", dir).Msg("egress profiles loaded")
	return srv, nil
}

// egressExtras gives srv the audit log of --egress-audit and the trust store of
// --egress-inject-ca. The audit's "-" is the process's stdout, which the
// configuration keeps from --transport stdio.
func egressExtras(srv *proxy.Server, cfg config.Config) error {
	if cfg.EgressInjectCA != "" {
		pool, err := config.LoadCAs(cfg.EgressInjectCA)
		if err != nil {
			return fmt.Errorf("%s: %w", config.Name("egress-inject-ca"), err)
		}
		srv.SetUpstreamRoots(pool)
	}
	if cfg.EgressAudit != "" {
		a, err := proxy.OpenAudit(cfg.EgressAudit, os.Stdout)
		if err != nil {
			return fmt.Errorf("%s: %w", config.Name("egress-audit"), err)
		}
		srv.SetAudit(a)
	}
	return nil
}

// checkEgress runs the launcher's start-up check of the egress channel (a sandbox
// connects to a socket of the server's), when profiles are configured; its error
// names the setting and, under gVisor, the runtime flag it lacks.
func checkEgress(ctx context.Context, cfg config.Config, l *launcher.Launcher, log zerolog.Logger) error {
	if l.Options().Egress == nil {
		return nil
	}
	// A cold sandbox, under gVisor on a loaded machine several seconds.
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t0 := time.Now()
	err := l.CheckEgress(ctx)
	if err == nil {
		log.Info().Int64("duration_ms", time.Since(t0).Milliseconds()).Msg("egress channel checked: a sandbox reaches it")
		return nil
	}
	hint := "run without " + config.Name("egress-profiles")
	if backend.GVisor(cfg.Runtime) {
		hint = "name it in " + config.Name("runtime") + ", or " + hint
	}
	return fmt.Errorf("%s: %w; %s (docs/egress.md)", config.Name("egress-profiles"), err, hint)
}

// egressTool describes the profiles of srv for exec's schema; nil without any.
func egressTool(srv *proxy.Server) []mcpserver.EgressProfile {
	if srv == nil {
		return nil
	}
	ps := srv.Profiles()
	var out []mcpserver.EgressProfile
	for _, n := range ps.Names() {
		p, _ := ps.Lookup(n)
		out = append(out, mcpserver.EgressProfile{Name: n, Hosts: p.Hosts(), Ports: p.Ports(), Inject: p.InjectHosts()})
	}
	return out
}

// egressOf is the profiles of l's egress proxy, for exec's schema.
func egressOf(l interface{ Options() launcher.Options }) []mcpserver.EgressProfile {
	srv, _ := l.Options().Egress.(*proxy.Server)
	return egressTool(srv)
}
