package upload

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// gitlabUploader uploads the bundle as a project markdown upload and links
// it from a note on the issue: GitLab has no per-issue attachments.
type gitlabUploader struct{}

func gitlabBase(j *Job) string {
	b := strings.TrimRight(j.env("GITLAB_URL"), "/")
	if b == "" {
		b = "https://gitlab.com"
	}
	return strings.TrimSuffix(b, "/api/v4")
}

type gitlabConf struct {
	base, api string // https://gitlab.example.com, .../api/v4/projects/group%2Fproject
	cred      credential
}

func gitlabConfig(j *Job) (gitlabConf, error) {
	c := gitlabConf{base: gitlabBase(j)}
	if !strings.HasPrefix(c.base, "https://") && !strings.HasPrefix(c.base, "http://") {
		return c, fmt.Errorf("GITLAB_URL must start with https://")
	}
	// The project path goes in one segment, its slashes escaped: GitLab's
	// URL-encoded project id.
	c.api = joinURL(c.base+"/api/v4", "projects", j.Target.Project)
	c.cred = credential{header: "PRIVATE-TOKEN", from: "GITLAB_TOKEN", value: j.env("GITLAB_TOKEN")}
	if err := j.requireCred(&c.cred, "GITLAB_TOKEN is not set (a personal, project or group access token with the api scope)"); err != nil {
		return c, err
	}
	insecure(j, c.base, "GITLAB_URL")
	return c, nil
}

func (gitlabUploader) uploadRequest(c gitlabConf, j *Job) (*request, error) {
	ct, n, open, err := multipartFile(j.Payload, "file", j.Payload.Name)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	c.cred.set(h)
	h.Set("Content-Type", ct)
	h.Set("Accept", "application/json")
	return &request{method: "POST", url: c.api + "/uploads", header: h, body: open, length: n, what: "upload"}, nil
}

func (gitlabUploader) notesURL(c gitlabConf, j *Job) string {
	return c.api + "/issues/" + strconv.Itoa(j.Target.Number) + "/notes"
}

func (u gitlabUploader) noteRequest(c gitlabConf, j *Job, link string) (*request, error) {
	return authedJSON("POST", u.notesURL(c, j), map[string]any{"body": markdownComment(j.Payload, link, gitlabNoteLimit)}, c.cred, "note")
}

func (u gitlabUploader) Plan(j *Job) ([]Step, error) {
	c, err := gitlabConfig(j)
	if err != nil {
		return nil, err
	}
	ur, err := u.uploadRequest(c, j)
	if err != nil {
		return nil, err
	}
	link := "[" + j.Payload.Name + "](<url returned by the upload>)"
	nr, err := u.noteRequest(c, j, link)
	if err != nil {
		return nil, err
	}
	return []Step{
		planStep("list uploads (Maintainer only), so that an upload an interrupted try left behind can be found and deleted", "GET", c.api+"/uploads?per_page=100", c.cred, nil, ""),
		planStep("upload the bundle", "POST", ur.url, c.cred, ur.header, fileBodyDesc(j, "file", j.Payload.Name, ur.length)),
		planStep("only when a note try failed without an answer: look for it before posting again", "GET", u.notesURL(c, j)+"?sort=desc&order_by=created_at&per_page=50", c.cred, nil, ""),
		withComment(planStep("note on the issue with the link, verdict and summary", "POST", nr.url, c.cred, nr.header, jsonBodyDesc(nr)), markdownComment(j.Payload, link, gitlabNoteLimit)),
	}, nil
}

type gitlabUpload struct {
	ID       flexID `json:"id"`
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
}

var numericProject = regexp.MustCompile(`^[0-9]+$`)

func (u gitlabUploader) Upload(ctx context.Context, j *Job) error {
	c, err := gitlabConfig(j)
	if err != nil {
		return err
	}
	// GitLab can list uploads but not say their secret URLs, so an upload
	// whose answer was lost cannot be reused; instead it is found by
	// comparing with what was there before the first try, and deleted.
	list := func() (map[string]bool, bool, error) {
		lr := &request{method: "GET", url: c.api + "/uploads?per_page=100", header: http.Header{"Accept": {"application/json"}}, what: "upload lookup"}
		c.cred.set(lr.header)
		resp, ok, err := j.lookup(ctx, lr)
		if err != nil || !ok {
			return nil, ok, err
		}
		var ups []gitlabUpload
		if resp.decode(&ups) != nil {
			return nil, false, nil
		}
		ids := map[string]bool{}
		for _, up := range ups {
			if up.Filename == j.Payload.Name && up.Size == j.Payload.Size {
				ids[string(up.ID)] = true
			}
		}
		return ids, true, nil
	}
	var before map[string]bool
	canList := false
	up, err := retry(ctx, j, "upload", func(try int) (*response, error) {
		if try == 1 {
			ids, ok, err := list()
			if err != nil {
				return nil, err
			}
			before, canList = ids, ok
		} else if canList {
			ids, ok, err := list()
			if err != nil {
				return nil, err
			}
			for id := range ids {
				if before[id] || !ok {
					continue
				}
				dr := &request{method: "DELETE", url: c.api + "/uploads/" + url.PathEscape(id), header: http.Header{}, what: "orphan upload delete"}
				c.cred.set(dr.header)
				if _, err := j.send(ctx, dr, 204, 200, 404); err != nil {
					return nil, err
				}
			}
		} else {
			j.warn("a try failed without an answer and this token cannot list uploads: the project may keep an unreferenced copy of %s", j.Payload.Name)
		}
		r, err := u.uploadRequest(c, j)
		if err != nil {
			return nil, err
		}
		return j.send(ctx, r, 201, 200)
	})
	if err != nil {
		return err
	}
	var created struct {
		ID       flexID `json:"id"`
		Alt      string `json:"alt"`
		URL      string `json:"url"`
		FullPath string `json:"full_path"`
		Markdown string `json:"markdown"`
	}
	if err := up.decode(&created); err != nil {
		return fmt.Errorf("upload: %v", err)
	}
	att := &Created{ID: string(created.ID), Name: j.Payload.Name}
	switch {
	case created.FullPath != "":
		att.URL = c.base + created.FullPath
	case created.URL != "" && !numericProject.MatchString(j.Target.Project):
		att.URL = c.base + "/" + j.Target.Project + created.URL
	}
	j.Result.Attachment = att
	link := created.Markdown
	if link == "" {
		link = fmt.Sprintf("[%s](%s)", j.Payload.Name, created.URL)
	}
	note, err := retry(ctx, j, "note", func(try int) (*Created, error) {
		if try > 1 {
			lr := &request{method: "GET", url: u.notesURL(c, j) + "?sort=desc&order_by=created_at&per_page=50", header: http.Header{"Accept": {"application/json"}}, what: "note lookup"}
			c.cred.set(lr.header)
			if resp, ok, err := j.lookup(ctx, lr); err != nil {
				return nil, err
			} else if ok {
				var ns []struct {
					ID   flexID `json:"id"`
					Body string `json:"body"`
				}
				if resp.decode(&ns) == nil {
					for _, n := range ns {
						if strings.Contains(n.Body, j.Payload.SHA256) {
							return &Created{ID: string(n.ID), URL: gitlabNoteURL(c, j, string(n.ID)), Reused: true}, nil
						}
					}
				}
			}
		}
		r, err := u.noteRequest(c, j, link)
		if err != nil {
			return nil, err
		}
		cm, err := j.sendComment(ctx, r, 201, 200)
		if err != nil {
			return nil, err
		}
		cm.URL = gitlabNoteURL(c, j, cm.ID) // no html_url in the answer
		return cm, nil
	})
	if err != nil {
		return err
	}
	j.Result.Comment = note
	return nil
}

func gitlabNoteURL(c gitlabConf, j *Job, id string) string {
	if numericProject.MatchString(j.Target.Project) {
		return ""
	}
	return fmt.Sprintf("%s/%s/-/issues/%d#note_%s", c.base, j.Target.Project, j.Target.Number, id)
}
