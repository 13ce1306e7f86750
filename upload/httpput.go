package upload

import (
	"context"
	"net/http"
	"strconv"
	"strings"
)

// putUploader PUTs the bundle to a URL, typically a pre-signed object-store
// URL (S3, GCS, Azure SAS): the signature in its query is the credential,
// so the URL is only ever shown with its query hidden.
type putUploader struct{}

func (putUploader) request(j *Job) *request {
	h := http.Header{}
	if strings.Contains(j.Target.URL.Host, ".blob.core.windows.net") {
		// Azure refuses a SAS PUT without a blob type.
		h.Set("X-Ms-Blob-Type", "BlockBlob")
	}
	return &request{method: "PUT", url: j.Target.URL.String(), header: h, body: fileBody(j.Payload), length: j.Payload.Size, what: "PUT"}
}

func (u putUploader) Plan(j *Job) ([]Step, error) {
	r := u.request(j)
	s := planStep("put the bundle (the URL's query, a signature, is not shown)", "PUT", j.Target.String(), credential{}, r.header, fileBodyDesc(j, "", "", r.length))
	s.Headers = append(s.Headers, "Content-Length: "+strconv.FormatInt(r.length, 10))
	return []Step{s}, nil
}

func (u putUploader) Upload(ctx context.Context, j *Job) error {
	insecureURL(j)
	// PUT replaces rather than adds, so a retry after a lost answer leaves
	// one object, not two: no lookup needed.
	resp, err := retry(ctx, j, "PUT", func(int) (*response, error) {
		return j.send(ctx, u.request(j), 200, 201, 204)
	})
	if err != nil {
		return err
	}
	j.Result.Attachment = &Created{ID: strings.Trim(resp.header.Get("ETag"), `"`), Name: j.Payload.Name, URL: safeURLNoMark(j)}
	return nil
}

// safeURLNoMark is the object's URL without the signature: what a link in a
// ticket can carry (it opens when the bucket allows reads).
func safeURLNoMark(j *Job) string {
	c := *j.Target.URL
	c.User, c.RawQuery, c.ForceQuery, c.Fragment = nil, "", false, ""
	return c.String()
}

func insecureURL(j *Job) {
	if j.Target.URL.Scheme == "http" && j.Target.URL.RawQuery != "" && !isLoopback(j.Target.URL.String()) {
		j.warn("the URL is http://: its signature travels unencrypted")
	}
}
