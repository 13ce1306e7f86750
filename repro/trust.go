package repro

import "strings"

// ChangesWhatRuns reports whether an environment variable decides which
// code runs, rather than how: a library preloaded or audited (LD_*), where
// commands and modules are found (PATH, PYTHONPATH, PERL5LIB, NODE_PATH...),
// a file a shell or an interpreter reads and runs at start (BASH_ENV, ENV,
// PYTHONSTARTUP), options that load code (NODE_OPTIONS, JAVA_TOOL_OPTIONS,
// PERL5OPT), exported shell functions, a home whose dotfiles and user
// site-packages are read. Such a variable from a bundle, which may come
// from anyone, is not re-applied without --trust-env.
func ChangesWhatRuns(name string) bool {
	if whatRuns[name] {
		return true
	}
	for _, p := range whatRunsPrefixes {
		if strings.HasPrefix(name, p) {
			return !harmlessPython[name]
		}
	}
	return false
}

var whatRuns = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true, "PS4": true,
	"PROMPT_COMMAND": true, "IFS": true, "CDPATH": true, "HOME": true, "ZDOTDIR": true,
	"NODE_OPTIONS": true, "NODE_PATH": true, "JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true,
	"JDK_JAVA_OPTIONS": true, "CLASSPATH": true, "LUA_PATH": true, "LUA_CPATH": true, "TCLLIBPATH": true,
	"GCONV_PATH": true, "GLIBC_TUNABLES": true, "HOSTALIASES": true, "RESOLV_HOST_CONF": true,
	"TORCH_EXTENSIONS_DIR": true, "TRITON_CACHE_DIR": true, "LD_LIBRARY_PATH": true,
}

// Any of these prefixes: the loader's (LD_*, DYLD_*), Python's, Perl's,
// Ruby's, exported bash functions, git's hooks and helpers.
var whatRunsPrefixes = []string{"LD_", "DYLD_", "PYTHON", "PERL", "RUBY", "BASH_FUNC_", "GIT_"}

// Python variables that only tune a run (buffering, hashing, fault
// handler, encoding): re-applied like any other.
var harmlessPython = map[string]bool{
	"PYTHONUNBUFFERED": true, "PYTHONFAULTHANDLER": true, "PYTHONHASHSEED": true,
	"PYTHONDONTWRITEBYTECODE": true, "PYTHONIOENCODING": true, "PYTHONUTF8": true,
	"PYTHONDEVMODE": true, "PYTHONTRACEMALLOC": true, "PYTHONMALLOC": true,
}
