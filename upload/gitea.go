package upload

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// giteaUploader attaches the bundle to a Gitea or Forgejo issue as an issue
// asset, then comments with its link.
type giteaUploader struct{}

type giteaConf struct {
	api  string // https://host/api/v1/repos/owner/repo/issues/N
	root string // https://host/api/v1
	cred credential
}

func giteaConfig(j *Job) (giteaConf, error) {
	c := giteaConf{root: j.Target.Base + "/api/v1"}
	c.api = c.root + "/repos/" + ownerRepoPath(j.Target.Project) + "/issues/" + strconv.Itoa(j.Target.Number)
	c.cred = credential{header: "Authorization", scheme: "token ", from: "GITEA_TOKEN", value: j.env("GITEA_TOKEN")}
	if err := j.requireCred(&c.cred, "GITEA_TOKEN is not set (an access token with the write:issue scope)"); err != nil {
		return c, err
	}
	insecure(j, c.root, "the gitea target URL")
	return c, nil
}

// giteaSettings is GET /settings/attachment: the server's own rules for
// attachments, which decide the file's suffix and the size limit.
type giteaSettings struct {
	Enabled      bool   `json:"enabled"`
	AllowedTypes string `json:"allowed_types"`
	MaxSize      int64  `json:"max_size"` // MiB
}

// allows mirrors Gitea's upload.Verify: "*/*", a suffix starting with a dot,
// or a MIME type (with /* wildcards) matched against the sniffed type.
func (s giteaSettings) allows(name string) bool {
	name = strings.ToLower(name)
	for _, e := range strings.Split(s.AllowedTypes, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "*/*" || e == "*":
			return true
		case strings.HasPrefix(e, "."):
			if strings.HasSuffix(name, e) {
				return true
			}
		case e == "application/x-gzip" || e == "application/gzip" || e == "application/*":
			return true
		}
	}
	return false
}

// fileName picks the bundle's name as the server will accept it: the
// default list has .gz and .tgz, but an admin may keep only one.
func (s giteaSettings) fileName(name string) (string, error) {
	if strings.TrimSpace(s.AllowedTypes) == "" || s.allows(name) {
		return name, nil
	}
	alt := strings.TrimSuffix(name, ".tar.gz") + ".tgz"
	if s.allows(alt) {
		return alt, nil
	}
	return "", fmt.Errorf("the server's [attachment] ALLOWED_TYPES (%s) accept neither .tar.gz nor .tgz; ask its admin to add .tgz, or put the bundle elsewhere and link it with --bundle-url", s.AllowedTypes)
}

func (u giteaUploader) assetRequest(c giteaConf, j *Job, name string) (*request, error) {
	ct, n, open, err := multipartFile(j.Payload, "attachment", name)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	c.cred.set(h)
	h.Set("Content-Type", ct)
	h.Set("Accept", "application/json")
	return &request{method: "POST", url: c.api + "/assets?name=" + url.QueryEscape(name), header: h, body: open, length: n, what: "attachment"}, nil
}

func (u giteaUploader) commentRequest(c giteaConf, j *Job, link string) (*request, error) {
	return authedJSON("POST", c.api+"/comments", map[string]any{"body": markdownComment(j.Payload, link, giteaCommentLimit)}, c.cred, "comment")
}

func (u giteaUploader) Plan(j *Job) ([]Step, error) {
	c, err := giteaConfig(j)
	if err != nil {
		return nil, err
	}
	ar, err := u.assetRequest(c, j, j.Payload.Name)
	if err != nil {
		return nil, err
	}
	link := fmt.Sprintf("[%s](<browser_download_url returned by the upload>)", j.Payload.Name)
	cr, err := u.commentRequest(c, j, link)
	if err != nil {
		return nil, err
	}
	return []Step{
		planStep("read the server's allowed attachment types and size limit (the name becomes .tgz if only that is allowed)", "GET", c.root+"/settings/attachment", c.cred, nil, ""),
		planStep("look for an attachment of the same name and size, so a rerun adds none", "GET", c.api+"/assets", c.cred, nil, ""),
		planStep("attach the bundle", "POST", ar.url, c.cred, ar.header, fileBodyDesc(j, "attachment", j.Payload.Name, ar.length)),
		planStep("only when a comment try failed without an answer: look for it before posting again", "GET", c.api+"/comments?since=<start of the upload>", c.cred, nil, ""),
		withComment(planStep("comment with the link, verdict and summary", "POST", cr.url, c.cred, cr.header, jsonBodyDesc(cr)), markdownComment(j.Payload, link, giteaCommentLimit)),
	}, nil
}

type giteaAsset struct {
	ID                 flexID `json:"id"`
	Name               string `json:"name"`
	Size               int64  `json:"size"`
	BrowserDownloadURL string `json:"browser_download_url"`
}

func (u giteaUploader) Upload(ctx context.Context, j *Job) error {
	c, err := giteaConfig(j)
	if err != nil {
		return err
	}
	get := func(what, u string) *request {
		r := &request{method: "GET", url: u, header: http.Header{"Accept": {"application/json"}}, what: what}
		c.cred.set(r.header)
		return r
	}
	name := j.Payload.Name
	st, err := retry(ctx, j, "settings", func(int) (*giteaSettings, error) {
		resp, ok, err := j.lookup(ctx, get("attachment settings", c.root+"/settings/attachment"))
		if err != nil || !ok {
			return nil, err
		}
		var s giteaSettings
		if resp.decode(&s) != nil {
			return nil, nil
		}
		return &s, nil
	})
	if err != nil {
		return err
	}
	if st != nil {
		if !st.Enabled {
			return fmt.Errorf("attachments are disabled on %s ([attachment] ENABLED); put the bundle elsewhere and link it with --bundle-url", j.Target.Base)
		}
		if name, err = st.fileName(name); err != nil {
			return err
		}
		if st.MaxSize > 0 && j.Opts.MaxSize <= 0 {
			if err := j.checkSize(st.MaxSize << 20); err != nil {
				return err
			}
		}
	}
	att, err := retry(ctx, j, "attachment", func(int) (*Created, error) {
		resp, ok, err := j.lookup(ctx, get("attachment lookup", c.api+"/assets"))
		if err != nil {
			return nil, err
		}
		if ok {
			var as []giteaAsset
			if resp.decode(&as) == nil {
				for _, a := range as {
					if a.Name == name && a.Size == j.Payload.Size {
						return &Created{ID: string(a.ID), Name: a.Name, URL: a.BrowserDownloadURL, Reused: true}, nil
					}
				}
			}
		}
		r, err := u.assetRequest(c, j, name)
		if err != nil {
			return nil, err
		}
		resp, err = j.send(ctx, r, 201, 200)
		if err != nil {
			return nil, err
		}
		var a giteaAsset
		if err := resp.decode(&a); err != nil {
			return nil, err // retried: the lookup finds it if it was made
		}
		return &Created{ID: string(a.ID), Name: a.Name, URL: a.BrowserDownloadURL}, nil
	})
	if err != nil {
		return err
	}
	j.Result.Attachment = att
	link := fmt.Sprintf("[%s](%s)", att.Name, att.URL)
	since := j.start.Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	cm, err := retry(ctx, j, "comment", func(try int) (*Created, error) {
		if try > 1 {
			resp, ok, err := j.lookup(ctx, get("comment lookup", c.api+"/comments?since="+url.QueryEscape(since)))
			if err != nil {
				return nil, err
			}
			if ok {
				if cm := reusedComment(resp, j.Payload.SHA256); cm != nil {
					return cm, nil
				}
			}
		}
		r, err := u.commentRequest(c, j, link)
		if err != nil {
			return nil, err
		}
		return j.sendComment(ctx, r, 201, 200)
	})
	if err != nil {
		return err
	}
	j.Result.Comment = cm
	return nil
}
