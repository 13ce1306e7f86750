package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kcrash/kcrash/fleet/index"
	"github.com/kcrash/kcrash/internal/s3client"
)

// s3Object is where a job's file lives when it is an S3 object.
type s3Object struct {
	client      *s3client.Client
	cred        aws.Credentials // only to mask it in errors
	bucket, key string
}

// listPageSize is how many keys one LIST asks for; 0 leaves it to the
// server (1,000 on AWS). Tests set it small to make many pages.
var listPageSize int32

// listS3 lists the bundles and tarballs under an s3://bucket/prefix, page
// by page. An object is stamped with its size and LastModified, which
// changes whenever the object is written again, so an index reads it once.
func (w Walk) listS3(ctx context.Context, src string, st *Stats) ([]job, error) {
	loc, err := s3client.Parse(src)
	if err != nil {
		return nil, err
	}
	c, err := s3client.New(ctx)
	if err != nil {
		return nil, err
	}
	cred, err := c.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", loc, err)
	}
	var jobs []job
	in := &s3.ListObjectsV2Input{Bucket: &loc.Bucket, Prefix: &loc.Prefix}
	if listPageSize > 0 {
		in.MaxKeys = aws.Int32(listPageSize)
	}
	pages := s3.NewListObjectsV2Paginator(c.S3, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, errors.New(c.Describe(err, "LIST", loc.String(), cred))
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if !candidate(path.Base(key)) {
				continue
			}
			p := s3client.ObjectURL(loc.Bucket, key)
			stamp := index.Stamp{Size: aws.ToInt64(o.Size), MTime: aws.ToTime(o.LastModified).UnixNano()}
			if w.Seen != nil && w.Seen(p, stamp) {
				st.Skipped++
				continue
			}
			jobs = append(jobs, job{path: p, stamp: stamp, s3: &s3Object{client: c, cred: cred, bucket: loc.Bucket, key: key}})
		}
	}
	return jobs, nil
}

// readS3 fetches an object into a temporary file, reads it as readFile
// reads a local one, and names what it read by the object's URL.
func readS3(ctx context.Context, j job, st *Stats, force bool) ([]index.Summary, error) {
	o := j.s3
	tmp, err := os.CreateTemp("", "kcrash-s3-*.tar.gz")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	out, err := o.client.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &o.key})
	if err == nil {
		_, err = io.Copy(tmp, out.Body)
		out.Body.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, errors.New(o.client.Describe(err, "GET", j.path, o.cred))
	}
	var local Stats
	sums, err := readFile(ctx, tmp.Name(), &local, force)
	rename := func(s string) string { return strings.ReplaceAll(s, tmp.Name(), j.path) }
	st.Read += local.Read
	st.Recomputed += local.Recomputed
	for _, e := range local.Errors {
		st.Errors = append(st.Errors, rename(e))
	}
	if err != nil {
		return nil, errors.New(rename(err.Error()))
	}
	for i := range sums {
		sums[i].Path = rename(sums[i].Path)
	}
	return sums, nil
}
