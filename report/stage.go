package report

import (
	"bytes"

	"github.com/kcrash/kcrash/bundle"
)

// StagePage is bundle.WriteOptions.Report: the page of a bundle being
// written, from its staged (already redacted) files, so that every bundle
// carries report.html.
func StagePage(dir, name string, m *bundle.Manifest) ([]byte, error) {
	in, err := FromDir(dir, name, m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
