// Package configs holds the data kcrash ships inside its binary: environment
// profiles, log signatures and the Xid catalog. The binary needs no files.
package configs

import "embed"

// FS holds every embedded YAML file.
//
//go:embed *.yaml
var FS embed.FS
