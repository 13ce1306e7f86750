package main

// reaperEnv tells a kcrash started by kcrash's own init process (PID 1 or a
// child subreaper) that it runs as a container's init.
const reaperEnv = "KCRASH_UNDER_INIT"
