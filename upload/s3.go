package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/cenkalti/backoff/v5"

	"github.com/kcrash/kcrash/internal/s3client"
)

// s3Uploader puts the bundle into a bucket as PREFIX/NAME through the AWS
// SDK: credentials, region and an S3-compatible endpoint come from the SDK's
// standard places (see internal/s3client), never from the target string.
// An object already at that key is never replaced: a HEAD looks first, and
// the PUT carries If-None-Match: * for a writer that got there in between.
type s3Uploader struct{}

// sha256Meta is the object metadata (x-amz-meta-sha256) that tells a rerun
// of the same bundle from another bundle under the same name.
const sha256Meta = "sha256"

func (s3Uploader) key(j *Job) string { return j.Target.Prefix + j.Payload.Name }

func (u s3Uploader) Plan(j *Job) ([]Step, error) {
	obj := s3client.ObjectURL(j.Target.Bucket, u.key(j))
	where := "AWS (region from AWS_REGION or the profile)"
	if c, err := s3client.New(context.Background()); err == nil {
		where = "AWS region " + c.Config.Region
		if c.Endpoint != "" {
			where = withoutUserinfo(c.Endpoint) + ", path-style"
		}
	}
	auth := "Authorization: AWS4-HMAC-SHA256 <the AWS SDK's credential chain>"
	return []Step{
		{Why: "look for an object already at the key (never over another object); at " + where, Method: "HEAD", URL: obj, Headers: []string{auth}},
		{Why: "put the bundle", Method: "PUT", URL: obj,
			Headers: []string{auth, "Content-Type: application/gzip", "If-None-Match: *", "X-Amz-Meta-Sha256: " + j.Payload.SHA256},
			Body:    fileBodyDesc(j, "", "", j.Payload.Size)},
	}, nil
}

// errObjectExists is the PUT's 412: something is at the key.
var errObjectExists = errors.New("object exists")

func (u s3Uploader) Upload(ctx context.Context, j *Job) error {
	c, err := s3client.New(ctx, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return err
	}
	cred, err := c.Credentials(ctx)
	if err != nil {
		return err
	}
	bucket, key := j.Target.Bucket, u.key(j)
	obj := s3client.ObjectURL(bucket, key)
	fail := func(op string, err error) error { return s3Failure(ctx, c.Describe(err, op, obj, cred), err) }
	made := &Created{Name: key, URL: obj}

	// same reports whether the object at the key is this bundle.
	same := func() (bool, error) {
		out, err := retry(ctx, j, "HEAD", func(int) (*s3.HeadObjectOutput, error) {
			out, err := c.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
			if s3client.Status(err) == 404 {
				return nil, nil
			}
			if err != nil {
				return nil, fail("HEAD", err)
			}
			return out, nil
		})
		if err != nil || out == nil {
			return false, err
		}
		if out.Metadata[sha256Meta] != j.Payload.SHA256 {
			return false, fmt.Errorf("%s exists and is another object; not overwriting it", obj)
		}
		made.ID, made.Reused = strings.Trim(aws.ToString(out.ETag), `"`), true
		return true, nil
	}
	if ok, err := same(); err != nil || ok {
		if ok {
			j.Result.Attachment = made
		}
		return err
	}
	out, err := retry(ctx, j, "PUT", func(int) (*s3.PutObjectOutput, error) {
		f, err := openSame(j.Payload)
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		defer f.Close()
		out, err := c.S3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &bucket, Key: &key,
			Body:          io.NewSectionReader(f, 0, j.Payload.Size),
			ContentLength: aws.Int64(j.Payload.Size),
			ContentType:   aws.String("application/gzip"),
			IfNoneMatch:   aws.String("*"),
			Metadata:      map[string]string{sha256Meta: j.Payload.SHA256},
		})
		if s3client.Status(err) == 412 || s3client.Code(err) == "PreconditionFailed" {
			return nil, backoff.Permanent(errObjectExists)
		}
		if err != nil {
			return nil, fail("PUT", err)
		}
		return out, nil
	})
	if errors.Is(err, errObjectExists) {
		// Another writer, or an earlier try whose answer was lost.
		if ok, err := same(); err != nil || ok {
			if ok {
				j.Result.Attachment = made
			}
			return err
		}
		return fmt.Errorf("%s exists and is another object; not overwriting it", obj)
	}
	if err != nil {
		return err
	}
	made.ID = strings.Trim(aws.ToString(out.ETag), `"`)
	j.Result.Attachment = made
	return nil
}

// s3Failure classifies a failed S3 request the way send classifies HTTP
// ones: throttling, 5xx and dropped connections are worth another try;
// refusals, a missing bucket, DNS and TLS failures are not.
func s3Failure(ctx context.Context, line string, err error) error {
	e := errors.New(line)
	if ctx.Err() != nil {
		return backoff.Permanent(context.Cause(ctx))
	}
	if st := s3client.Status(err); st != 0 {
		if st == 429 || st == 408 || (st >= 500 && st != 501 && st != 505) || s3client.Code(err) == "SlowDown" {
			return e
		}
		return backoff.Permanent(e)
	}
	if permanentNetErr(err) {
		return backoff.Permanent(e)
	}
	return e
}
