// Command kcrash supervises GPU inference jobs and bundles the evidence when they crash.
package main

import "os"

func main() { os.Exit(Main()) }
