// Command mcp-exec is an MCP server whose tool exec runs Python in a throwaway,
// locked-down sandbox: a sibling container by default, a Kubernetes pod, or a child
// process in one locked container. Its subcommands are serve (the default), run,
// selftest, healthcheck, seccomp-profile and version (main.go's table). The package
// wires configuration (internal/config), logger, backend, launcher, server and signals
// together, and holds what only the binary needs: the HTTP door, metrics, the probes.
package main

//go:generate go test ./internal/config -run ^TestConfigDocCurrent$ -update-config-doc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/config"
	"github.com/mcp-exec/mcp-exec/cmd/mcp-exec/internal/nodump"
	"github.com/mcp-exec/mcp-exec/launcher"
	"github.com/mcp-exec/mcp-exec/launcher/backend"
	"github.com/mcp-exec/mcp-exec/launcher/engine"
	"github.com/mcp-exec/mcp-exec/launcher/owner"
)

func main() {
	// Non-dumpable already (the package's init, before this package's own): every
	// subcommand's environment and memory are closed to same-user processes.
	if nodump.Err != nil {
		fmt.Fprintf(os.Stderr, "mcp-exec: making the process non-dumpable (prctl PR_SET_DUMPABLE): %v\n", nodump.Err)
		os.Exit(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			if stopOnSignal.Load().(func(os.Signal) bool)(s) {
				stop()
			}
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	signal.Stop(sigs)
	stop()
	os.Exit(code)
}

// stopOnSignal decides whether SIGTERM or SIGINT stops the server gracefully. It
// always does, except in standalone mode, where a program (running as the server's
// user) may be the sender: see newProcessLauncher.
var stopOnSignal = func() *atomic.Value {
	var v atomic.Value
	v.Store(func(os.Signal) bool { return true })
	return &v
}()

// cmdEnv is what a subcommand runs with: its context and streams, and (unless
// noConfig) the loaded configuration, a logger and the arguments after the flags.
type cmdEnv struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	cfg            config.Config
	log            zerolog.Logger
	args           []string
	jsonOut        bool   // run --json
	language       string // run --language
}

// subcommand is one entry of mcp-exec's command table.
type subcommand struct {
	name, help string
	noConfig   bool                              // runs without flags or configuration
	noToken    bool                              // never reads the auth token (variable or file)
	flags      func(fs *flag.FlagSet, e *cmdEnv) // its own flags, besides the configuration's
	run        func(e *cmdEnv) int
}

// subcommands, in the order --help lists them; the first is the default.
var subcommands = []subcommand{
	{name: "serve", help: "serve the MCP tool (the default when no subcommand is given)", run: serveCmd},
	{name: "run", help: "run one program (FILE, or - for standard input) in the sandbox and print its result (--json: the tool's structured result)",
		flags: func(fs *flag.FlagSet, e *cmdEnv) {
			fs.BoolVar(&e.jsonOut, "json", false, "print the structured result as JSON on stdout (run only)")
			fs.StringVar(&e.language, "language", launcher.LanguagePython, "the program's language, one of --languages (run only)")
		},
		run: runCmd},
	{name: "selftest", help: "run the built-in sandbox probes against the configured engine and image; non-zero exit on any failure", run: selftestCmd},
	{name: "healthcheck", help: "exit 0 if the server is ready: /readyz for http and sse, the engine and image for stdio",
		noToken: true, // /readyz answers without it; in standalone mode the server has removed its file
		run:     func(e *cmdEnv) int { return healthcheck(e.ctx, e.cfg, e.stderr) }},
	{name: "seccomp-profile", help: "print the sandboxes' seccomp profile resolved for no capabilities (OCI JSON), to install on Kubernetes nodes for --kube-seccomp-profile; --gvisor: the one for a gVisor RuntimeClass (clone3 allowed)", noConfig: true,
		run: seccompProfileCmd},
	{name: "version", help: "print the version and build information", noConfig: true,
		run: func(e *cmdEnv) int { fmt.Fprintln(e.stdout, versionString()); return 0 }},
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	name := subcommands[0].name
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		name, args = subcommands[0].name, []string{"--help"}
	}
	i := slices.IndexFunc(subcommands, func(c subcommand) bool { return c.name == name })
	if i < 0 {
		fmt.Fprintf(stderr, "mcp-exec: unknown subcommand %q; try mcp-exec --help\n", name)
		return 2
	}
	cmd := subcommands[i]
	e := &cmdEnv{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if cmd.noConfig {
		e.args = args
		return cmd.run(e)
	}
	if cmd.noToken {
		env := getenv
		getenv = func(k string) string {
			if k == config.AuthTokenEnv || k == config.Var("auth-token-file") {
				return ""
			}
			return env(k)
		}
	}
	fs := flag.NewFlagSet("mcp-exec "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if cmd.flags != nil {
		cmd.flags(fs, e)
	}
	cfg, err := loadConfig(fs, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-exec: %v\n", err)
		return 2
	}
	e.cfg, e.log, e.args = cfg, newLogger(cfg, stderr), fs.Args()
	return cmd.run(e)
}

// loadConfig is config.Load with mcp-exec's help text: the synopsis and the
// subcommands, then the settings.
func loadConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config.Config, error) {
	fs.Usage = func() { usage(fs, fs.Output()) }
	return config.Load(fs, args, getenv)
}

// usage writes the help text: the synopsis and the subcommands, then every flag
// (config.Usage).
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintln(w, "Usage: mcp-exec [serve|run|selftest|healthcheck|version] [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Subcommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.help)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	config.Usage(fs, w)
}

// oneOff gives a one-off command (run, selftest) an instance name of its own, so that
// it never reaps the sandboxes of a server sharing the configured name, and starts
// its launcher.
func oneOff(e *cmdEnv, name string) (*launcher.Launcher, func(), bool) {
	e.cfg.Instance = fmt.Sprintf("%.40s-%s-%d", e.cfg.Instance, name, os.Getpid())
	e.cfg.SessionPoolSize = 0
	l, cleanup, err := newLauncher(e.ctx, e.cfg, e.log, newMetrics(), false)
	if err != nil {
		e.log.Error().Err(err).Msg("starting")
		fmt.Fprintf(e.stderr, "mcp-exec: %v\n", err)
		return nil, nil, false
	}
	return l, cleanup, true
}

func runCmd(e *cmdEnv) int {
	if langs := config.SplitList(e.cfg.Languages); !slices.Contains(langs, e.language) {
		fmt.Fprintf(e.stderr, "mcp-exec: --language %q is not one of %s: %s\n", e.language, config.Name("languages"), strings.Join(langs, ", "))
		return 2
	}
	e.cfg.PoolSize = 0
	l, cleanup, ok := oneOff(e, "run")
	if !ok {
		return 1
	}
	defer cleanup()
	return runOnce(e.ctx, l, e.cfg, e.args, e.language, e.jsonOut, e.stdin, e.stdout, e.stderr)
}

func selftestCmd(e *cmdEnv) int {
	l, cleanup, ok := oneOff(e, "selftest")
	if !ok {
		return 1
	}
	defer cleanup()
	return selftest(e.ctx, e.cfg, l, e.stdout)
}

func seccompProfileCmd(e *cmdEnv) int {
	gvisor := false
	for _, a := range e.args {
		if a != "--gvisor" && a != "-gvisor" {
			fmt.Fprintf(e.stderr, "mcp-exec seccomp-profile: unknown argument %q; usage: mcp-exec seccomp-profile [--gvisor]\n", a)
			return 2
		}
		gvisor = true
	}
	p, err := ociSeccompProfile(gvisor)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-exec: %v\n", err)
		return 1
	}
	fmt.Fprintln(e.stdout, p)
	return 0
}

func serveCmd(e *cmdEnv) int {
	if err := checkOpenDoor(e.cfg, e.log); err != nil {
		e.log.Error().Err(err).Msg("starting")
		fmt.Fprintf(e.stderr, "mcp-exec: %v\n", err)
		return 1
	}
	m := newMetrics()
	l, cleanup, err := newLauncher(e.ctx, e.cfg, e.log, m, true)
	if err != nil {
		e.log.Error().Err(err).Msg("starting")
		fmt.Fprintf(e.stderr, "mcp-exec: %v\n", err)
		return 1
	}
	defer cleanup()
	e.cfg.LogFields(e.log.Info()).Str("version", version).Msg("configuration")
	if err := serve(e.ctx, e.cfg, l, m, e.log); err != nil {
		e.log.Error().Err(err).Msg("serving")
		return 1
	}
	return 0
}

func newLogger(cfg config.Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	out := w
	if f, ok := w.(*os.File); ok && (cfg.LogFormat == "console" || cfg.LogFormat == "auto" && isatty.IsTerminal(f.Fd())) {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	} else if cfg.LogFormat == "console" {
		out = zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// newLauncher connects to the engine, checks it and the image, and removes sandboxes
// an earlier run of this instance left behind. Its errors say what to do, naming each
// setting by flag and variable (backend.Spelled).
func newLauncher(ctx context.Context, cfg config.Config, log zerolog.Logger, m *metrics, reap bool) (_ *launcher.Launcher, _ func(), err error) {
	defer func() { err = backend.Spelled(err, config.Var) }()
	if cfg.Backend == "process" {
		return newProcessLauncher(ctx, cfg, log, m, reap)
	}
	be, err := openBackend(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	opts := launcherOptions(cfg, cfg.Image, m, log)
	opts.Runtime = cfg.Runtime
	opts.EngineWait = cfg.EngineWait
	opts.SessionPool = sessionPool(cfg)
	opts.Owner = serverOwner(cfg, log)
	if !opts.Owner.IsZero() {
		opts.OwnerContainer = owner.Proc{}.Container()
	}
	if eg, err := newEgress(cfg, be.host, opts.Owner, log); err != nil {
		be.close()
		return nil, nil, err
	} else if eg != nil {
		opts.Egress = eg
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// The launcher gets the backend itself, not the wrapper: its optional interfaces
	// (kube's Reattacher, GoneAwaiter, LimitsHinter; docker's HostPider) must show.
	l, cleanup, err := startLauncher(cctx, cfg, be.Backend, opts, m, log, func(context.Context) { be.close() })
	if err != nil {
		return nil, nil, err
	}
	if reap {
		n, err := l.Reap(cctx)
		if err != nil {
			log.Warn().Err(err).Msg("removing leftover sandboxes")
		} else if n > 0 {
			log.Info().Int("containers", n).Msg("removed sandboxes left by an earlier run of this instance")
		}
		if err := verifyLimits(ctx, cfg, l, log); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	if err := checkEgress(ctx, cfg, l, log); err != nil {
		cleanup()
		return nil, nil, err
	}
	if reap { // serving: a one-off command runs what it was given and fails as it does
		if err := checkLanguages(ctx, cfg, l, log); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	l.StartPool()
	name, err := l.EngineName(cctx)
	if err != nil {
		name = "unknown engine: " + err.Error()
	}
	log.Info().Str("backend", cfg.Backend).Str("engine", name).Str("engine_host", be.host).Str("runtime", cfg.Runtime).Msg("engine ready")
	return l, cleanup, nil
}

// startLauncher makes the launcher over be and checks the backend and the image
// within ctx. Its cleanup closes the launcher, then be (closeBackend), within
// ShutdownGrace; on an error both are closed already.
func startLauncher(ctx context.Context, cfg config.Config, be launcher.Backend, opts launcher.Options, m *metrics, log zerolog.Logger, closeBackend func(context.Context)) (*launcher.Launcher, func(), error) {
	l, err := launcher.New(be, opts)
	if err != nil {
		closeBackend(context.Background())
		return nil, nil, err
	}
	m.watchPool(l)
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			log.Warn().Err(err).Msg("closing launcher")
		}
		closeBackend(ctx)
	}
	if err := l.Check(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	return l, cleanup, nil
}

// launcherOptions are the launcher's options every backend takes from the
// configuration; a backend's own (runtime, engine wait) are set by its caller.
func launcherOptions(cfg config.Config, image string, m *metrics, log zerolog.Logger) launcher.Options {
	return launcher.Options{
		Image:          image,
		Python:         cfg.Python,
		Memory:         cfg.Memory,
		Pids:           cfg.Pids,
		CPUs:           cfg.CPUs,
		TmpfsSize:      cfg.TmpfsSize,
		MaxOutputBytes: int(cfg.MaxOutputBytes),
		MaxFileBytes:   int(cfg.MaxFileBytes),
		MaxFilesBytes:  int(cfg.MaxFilesBytes),
		DefaultTimeout: cfg.DefaultTimeout,
		Instance:       cfg.Instance,
		MaxConcurrent:  cfg.MaxConcurrent,
		MaxQueue:       cfg.MaxQueue,
		PoolSize:       cfg.PoolSize,
		Preload:        config.SplitList(cfg.Preload),
		Prestart:       config.SplitList(cfg.PoolPrestart),
		Metrics:        m,
		Logger:         log,
	}
}

// serverOwner is this process's owner.ID on the docker backend, whose sandboxes it
// labels with it so that servers sharing the engine and an instance name never remove
// each other's (launcher/owners.go). On Kubernetes an instance is one replica's (its
// pod's name) and the zero value keeps that rule; so it does where /proc cannot be
// read, with a warning, since a second server of the same instance would then lose
// its sandboxes to this one's start.
func serverOwner(cfg config.Config, log zerolog.Logger) owner.ID {
	if cfg.Backend != "docker" {
		return owner.ID{}
	}
	host, _ := os.Hostname()
	o, err := owner.Proc{}.Self(host)
	if err != nil {
		log.Warn().Err(err).Msg("this server cannot name itself as its sandboxes' owner: its start will remove every sandbox of its instance, a live server's too; give each server its own " + config.Name("instance"))
		return owner.ID{}
	}
	return o
}

// sessionPool is the launcher's session pool: on the docker backend only (Kubernetes
// sessions start their pod cold), none without sessions, and never larger than
// --max-sessions. A one-off command (run, selftest) opens no session and keeps none.
func sessionPool(cfg config.Config) launcher.SessionPoolOptions {
	if cfg.Backend != "docker" || cfg.MaxSessions == 0 {
		return launcher.SessionPoolOptions{}
	}
	return launcher.SessionPoolOptions{
		Size:     min(cfg.SessionPoolSize, cfg.MaxSessions),
		Memory:   cfg.SessionMemory,
		Lifetime: cfg.SessionMaxLifetime,
	}
}

// engineClient connects to the configured engine (engine.NewClientWith), logging
// an insecure connection that --allow-insecure-engine let through as an error.
func engineClient(cfg config.Config, log zerolog.Logger) (*client.Client, error) {
	return engine.NewClientWith(cfg.EngineHost, engine.ConnOptions{
		AllowInsecure: cfg.AllowInsecureEngine,
		Warn:          func(msg string) { log.Error().Msg(msg) },
	})
}

// checkEngine is Launcher.Check on a backend of its own: the engine answers and the
// image is present.
func checkEngine(ctx context.Context, cfg config.Config) error {
	be, err := openBackend(cfg, zerolog.Nop())
	if err != nil {
		return err
	}
	defer be.close()
	l, err := launcher.New(be, launcher.Options{Image: cfg.Image, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	return l.Check(ctx)
}

// verifyLimits runs one sandbox that reports the limits it actually gets, and refuses
// to serve when the engine ignores one, unless the operator overrode that loudly.
func verifyLimits(ctx context.Context, cfg config.Config, l *launcher.Launcher, log zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := l.VerifyLimits(ctx)
	if errors.Is(err, launcher.ErrLimitsNotEnforced) && cfg.AllowUnenforcedLimits {
		log.Error().Err(err).Msg("UNSAFE: serving although the engine does not enforce these limits (--allow-unenforced-limits, MCP_EXEC_ALLOW_UNENFORCED_LIMITS)")
		return nil
	}
	if errors.Is(err, launcher.ErrLimitsNotEnforced) {
		return fmt.Errorf("%w; refusing to serve (override, at your own risk, with --allow-unenforced-limits or MCP_EXEC_ALLOW_UNENFORCED_LIMITS=true)", err)
	}
	return err
}
