// Package s3client is how kcrash reaches S3 and S3-compatible stores, for
// uploads (upload's s3:// target) and for reading bundles back (fleet/source):
// s3://bucket/prefix locations, a client configured the AWS SDK's standard
// way, and errors as one line that names no credential.
//
// Everything comes from the SDK's standard places, never from kcrash flags:
// credentials from its default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE and the shared config and credentials files, web identity,
// SSO, ECS and EC2 instance metadata), the region from AWS_REGION or the
// profile, and an endpoint for an S3-compatible server from
// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the profile's endpoint_url. With
// such an endpoint, requests are path-style (http://host/bucket/key): most
// S3-compatible servers (MinIO, Ceph RGW, gofakes3) have no per-bucket DNS.
package s3client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kcrash/kcrash/internal/redact"
	"github.com/kcrash/kcrash/internal/visible"
)

// Location is an s3://bucket/prefix URL.
type Location struct {
	Bucket string
	Prefix string // "" or a key prefix ending in "/"
}

// IsURL says whether s is an s3:// URL.
func IsURL(s string) bool { return strings.HasPrefix(strings.ToLower(s), "s3://") }

// Parse reads s3://bucket[/prefix[/]]. The prefix is a folder: it gets a
// trailing slash, so that s3://b/nightly holds nightly/NAME, not nightlyNAME.
func Parse(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil || !strings.EqualFold(u.Scheme, "s3") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Location{}, fmt.Errorf("%q: want s3://bucket/prefix", s)
	}
	prefix := strings.TrimLeft(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return Location{Bucket: u.Host, Prefix: prefix}, nil
}

// String is the location as an s3:// URL.
func (l Location) String() string { return "s3://" + l.Bucket + "/" + l.Prefix }

// ObjectURL is s3://bucket/key.
func ObjectURL(bucket, key string) string { return "s3://" + bucket + "/" + key }

// Client is an S3 client and what it was configured with.
type Client struct {
	S3     *s3.Client
	Config aws.Config
	// Endpoint is the configured S3-compatible endpoint, "" for AWS itself.
	Endpoint string
}

// DefaultRegion is used when neither the environment nor the profile names
// one: S3-compatible servers take any region, and AWS answers a bucket of
// another region with a redirect that Describe explains.
const DefaultRegion = "us-east-1"

// New loads the SDK's default configuration; opts adjust the S3 client's
// options after the endpoint was resolved (upload turns the SDK's retries off
// to retry with kcrash's own backoff, as every target does).
func New(ctx context.Context, opts ...func(*s3.Options)) (*Client, error) {
	// The SDK's own log lines ("falling back to IMDSv1", "Response has no
	// supported checksum") would land amid the child's stderr; errors say
	// what matters.
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %v", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	c := &Client{Config: cfg}
	c.S3 = s3.NewFromConfig(cfg, func(o *s3.Options) {
		// o.BaseEndpoint is resolved here already, from AWS_ENDPOINT_URL_S3,
		// AWS_ENDPOINT_URL or the profile's endpoint_url.
		if o.BaseEndpoint != nil {
			c.Endpoint = *o.BaseEndpoint
			o.UsePathStyle = true
		}
		for _, f := range opts {
			f(o)
		}
	})
	return c, nil
}

// Credentials resolves the chain once, so that "no credentials" is one
// clear error before any request rather than one per request.
func (c *Client) Credentials(ctx context.Context) (aws.Credentials, error) {
	if c.Config.Credentials == nil {
		return aws.Credentials{}, errors.New("no AWS credentials")
	}
	cr, err := c.Config.Credentials.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("no AWS credentials found by the SDK's chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws/credentials, web identity, instance metadata)")
	}
	return cr, nil
}

// Status is the HTTP status of a failed request, 0 when none came back.
func Status(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// Code is the S3 error code (NoSuchBucket, AccessDenied, ...), "" if none.
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Describe is err as one line for a terminal: what was asked of which
// object, the server's code and message, and what to check. The SDK's own
// text (operation names, request ids, wrapped layers) is dropped, the
// credentials' values are masked wherever a server echoed them, and
// control characters are made visible.
func (c *Client) Describe(err error, op, object string, cred aws.Credentials) string {
	var msg string
	status, code := Status(err), Code(err)
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorMessage() != "":
		msg = ae.ErrorCode() + ": " + ae.ErrorMessage()
	case code != "":
		msg = code
	default:
		// No answer: the cause is the innermost error (a refused or reset
		// connection, DNS), without the SDK's wrapping.
		msg = innermost(err).Error()
	}
	if status != 0 {
		msg += fmt.Sprintf(" (HTTP %d)", status)
	}
	line := fmt.Sprintf("%s %s: %s", op, object, msg)
	if h := c.hint(status, code); h != "" {
		line += "; " + h
	}
	var secrets []string
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": cred.AccessKeyID, "AWS_SECRET_ACCESS_KEY": cred.SecretAccessKey, "AWS_SESSION_TOKEN": cred.SessionToken} {
		if v != "" {
			secrets = append(secrets, k+"="+v)
		}
	}
	line = redact.New(secrets).String(line)
	const max = 400
	if r := []rune(line); len(r) > max {
		line = string(r[:max]) + "…"
	}
	return visible.Line(line)
}

func (c *Client) where() string {
	if c.Endpoint != "" {
		return c.Endpoint
	}
	return "AWS region " + c.Config.Region
}

func (c *Client) hint(status int, code string) string {
	switch {
	case code == "NoSuchBucket":
		return "no such bucket at " + c.where() + "; check the bucket's name, and AWS_ENDPOINT_URL_S3 for an S3-compatible server"
	case code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" || status == 301:
		return "the bucket is in another region than " + c.Config.Region + "; set AWS_REGION"
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || status == 401:
		return "check the credentials the AWS SDK's chain found (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws/credentials)"
	case code == "AccessDenied" || status == 403:
		return "the credentials may lack s3:PutObject, s3:GetObject or s3:ListBucket on this bucket and prefix"
	}
	return ""
}

// innermost is the cause under the SDK's layers: a *url.Error's own error
// (which says "dial tcp HOST: connection refused"), else the last in the chain.
func innermost(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
