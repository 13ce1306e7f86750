package main

import (
	"context"
	"fmt"

	"github.com/kcrash/kcrash/upload"
)

// uploadBundle sends a freshly written bundle to --upload's target. A failed
// upload is reported and changes nothing else: the bundle is on disk and the
// child's status still propagates.
func uploadBundle(ctx context.Context, s *streams, cfg *userConfig, target, path string) {
	res, err := upload.Do(ctx, path, target, uploadOptions(s, cfg))
	if res != nil {
		reportUpload(s.Err, "kcrash: ", res)
	}
	if err != nil {
		fmt.Fprintf(s.Err, "kcrash: upload: %v\n", err)
	}
}
