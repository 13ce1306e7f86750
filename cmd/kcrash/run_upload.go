package main

import (
	"context"
	"fmt"

	"github.com/kcrash/kcrash/upload"
)

// uploadBundle sends a freshly written bundle to --upload's target. A failed
// upload is reported and changes nothing else: the bundle is on disk and the
// child's status still propagates.
func (p *pipeline) uploadBundle(ctx context.Context, path string) {
	res, err := upload.Do(ctx, path, p.o.upload, uploadOptions(p.s, p.cfg))
	if res != nil {
		reportUpload(p.s.Err, "kcrash: ", res)
	}
	if err != nil {
		fmt.Fprintf(p.s.Err, "kcrash: upload: %v\n", err)
	}
}
