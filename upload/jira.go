package upload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// jiraUploader attaches the bundle to a Jira issue (Cloud, Server, Data
// Center) through REST v2, then comments: v2 wiki text, or with --adf a v3
// comment in Atlassian Document Format.
type jiraUploader struct{}

type jiraConf struct {
	base string
	cred credential
}

func jiraConfig(j *Job) (jiraConf, error) {
	var c jiraConf
	c.base = strings.TrimRight(j.env("JIRA_URL"), "/")
	user, token, pat := j.env("JIRA_USER"), j.env("JIRA_API_TOKEN"), j.env("JIRA_PAT")
	switch {
	case user != "" && token != "":
		c.cred = credential{header: "Authorization", scheme: "Basic ", from: "JIRA_USER:JIRA_API_TOKEN",
			value: base64.StdEncoding.EncodeToString([]byte(user + ":" + token))}
	case pat != "":
		c.cred = credential{header: "Authorization", scheme: "Bearer ", from: "JIRA_PAT", value: pat}
	}
	var missing []string
	if c.base == "" {
		missing = append(missing, "JIRA_URL is not set (e.g. https://yourcompany.atlassian.net)")
	} else if !strings.HasPrefix(c.base, "https://") && !strings.HasPrefix(c.base, "http://") {
		return c, fmt.Errorf("JIRA_URL must start with https://")
	}
	if c.cred.value == "" {
		missing = append(missing, "no credentials: set JIRA_USER and JIRA_API_TOKEN (Jira Cloud: account email and API token) or JIRA_PAT (Server/Data Center personal access token)")
	}
	if len(missing) > 0 {
		if !j.Opts.DryRun {
			return c, fmt.Errorf("%s", strings.Join(missing, "; "))
		}
		for _, m := range missing {
			j.warn("%s", m)
		}
		if c.base == "" {
			c.base = "$JIRA_URL"
		}
		if c.cred.value == "" {
			c.cred = credential{header: "Authorization", scheme: "Basic ", from: "JIRA_USER:JIRA_API_TOKEN, not set"}
		}
	}
	insecure(j, c.base, "JIRA_URL")
	return c, nil
}

// insecure warns when credentials would cross the network in clear text.
func insecure(j *Job, base, name string) {
	if strings.HasPrefix(base, "http://") && !isLoopback(base) {
		j.warn("%s is http://: the credentials travel unencrypted", name)
	}
}

func (jiraUploader) urls(c jiraConf, j *Job) (issue, attach, comment string) {
	issue = joinURL(c.base, "rest", "api", "2", "issue", j.Target.Issue)
	attach = issue + "/attachments"
	comment = issue + "/comment"
	if j.Opts.ADF {
		comment = joinURL(c.base, "rest", "api", "3", "issue", j.Target.Issue, "comment")
	}
	return
}

func (u jiraUploader) attachRequest(c jiraConf, j *Job) (*request, error) {
	_, attach, _ := u.urls(c, j)
	ct, n, open, err := multipartFile(j.Payload, "file", j.Payload.Name)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	c.cred.set(h)
	h.Set("X-Atlassian-Token", "no-check") // Jira's XSRF check blocks multipart posts without it
	h.Set("Content-Type", ct)
	h.Set("Accept", "application/json")
	return &request{method: "POST", url: attach, header: h, body: open, length: n, what: "attachment"}, nil
}

func (u jiraUploader) commentRequest(c jiraConf, j *Job, attachURL string) (*request, error) {
	_, _, curl := u.urls(c, j)
	var body any = map[string]any{"body": jiraWikiComment(j.Payload, j.Payload.Name)}
	if j.Opts.ADF {
		body = map[string]any{"body": adfComment(j.Payload, j.Payload.Name, attachURL)}
	}
	return authedJSON("POST", curl, body, c.cred, "comment")
}

func (u jiraUploader) Plan(j *Job) ([]Step, error) {
	c, err := jiraConfig(j)
	if err != nil {
		return nil, err
	}
	issue, _, curl := u.urls(c, j)
	ar, err := u.attachRequest(c, j)
	if err != nil {
		return nil, err
	}
	cr, err := u.commentRequest(c, j, "<attachment URL>")
	if err != nil {
		return nil, err
	}
	return []Step{
		planStep("look for an attachment of the same name and size, so a rerun adds none", "GET", issue+"?fields=attachment", c.cred, nil, ""),
		planStep("attach the bundle", "POST", ar.url, c.cred, ar.header, fileBodyDesc(j, "file", j.Payload.Name, ar.length)),
		planStep("only when a comment try failed without an answer: look for it before posting again", "GET", curl+"?orderBy=-created&maxResults=50", c.cred, nil, ""),
		withComment(planStep("comment with the verdict and summary", "POST", cr.url, c.cred, cr.header, jsonBodyDesc(cr)), jiraPlanText(j)),
	}, nil
}

type jiraAttachment struct {
	ID       flexID `json:"id"`
	Filename string `json:"filename"`
	Size     int64  `json:"size"`
	Content  string `json:"content"`
}

func (u jiraUploader) Upload(ctx context.Context, j *Job) error {
	c, err := jiraConfig(j)
	if err != nil {
		return err
	}
	issue, _, curl := u.urls(c, j)
	att, err := retry(ctx, j, "attachment", func(try int) (*Created, error) {
		// An earlier try (or run) whose answer was lost may have attached it already.
		lr := &request{method: "GET", url: issue + "?fields=attachment", header: http.Header{"Accept": {"application/json"}}, what: "attachment lookup"}
		c.cred.set(lr.header)
		if resp, ok, err := j.lookup(ctx, lr); err != nil {
			return nil, err
		} else if ok {
			var is struct {
				Fields struct {
					Attachment []jiraAttachment `json:"attachment"`
				} `json:"fields"`
			}
			if resp.decode(&is) == nil {
				for _, a := range is.Fields.Attachment {
					if a.Filename == j.Payload.Name && a.Size == j.Payload.Size {
						return &Created{ID: string(a.ID), Name: a.Filename, URL: a.Content, Reused: true}, nil
					}
				}
			}
		}
		r, err := u.attachRequest(c, j)
		if err != nil {
			return nil, err
		}
		resp, err := j.send(ctx, r, 200, 201)
		if err != nil {
			return nil, err
		}
		var as []jiraAttachment
		if err := resp.decode(&as); err != nil || len(as) == 0 {
			return nil, fmt.Errorf("attachment: the answer lists no attachment")
		}
		return &Created{ID: string(as[0].ID), Name: as[0].Filename, URL: as[0].Content}, nil
	})
	if err != nil {
		return err
	}
	j.Result.Attachment = att
	cm, err := retry(ctx, j, "comment", func(try int) (*Created, error) {
		if try > 1 {
			lr := &request{method: "GET", url: curl + "?orderBy=-created&maxResults=50", header: http.Header{"Accept": {"application/json"}}, what: "comment lookup"}
			c.cred.set(lr.header)
			if resp, ok, err := j.lookup(ctx, lr); err != nil {
				return nil, err
			} else if ok {
				var cs struct {
					Comments []struct {
						ID   flexID          `json:"id"`
						Body json.RawMessage `json:"body"`
					} `json:"comments"`
				}
				if resp.decode(&cs) == nil {
					for _, cm := range cs.Comments {
						if bytes.Contains(cm.Body, []byte(j.Payload.SHA256)) {
							return &Created{ID: string(cm.ID), URL: jiraCommentURL(c.base, j.Target.Issue, string(cm.ID)), Reused: true}, nil
						}
					}
				}
			}
		}
		r, err := u.commentRequest(c, j, att.URL)
		if err != nil {
			return nil, err
		}
		cm, err := j.sendComment(ctx, r, 201, 200)
		if err != nil {
			return nil, err
		}
		cm.URL = jiraCommentURL(c.base, j.Target.Issue, cm.ID) // no html_url in the answer
		return cm, nil
	})
	if err != nil {
		return err
	}
	j.Result.Comment = cm
	return nil
}

func jiraCommentURL(base, key, id string) string {
	return fmt.Sprintf("%s/browse/%s?focusedCommentId=%s", base, key, id)
}

// flexID takes an id whether the API sends it as a string (Jira, mostly) or
// a number (GitLab, GitHub, Gitea).
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexID(n.String())
	return nil
}

func jiraPlanText(j *Job) string {
	if j.Opts.ADF {
		return "" // the body is the document itself
	}
	return jiraWikiComment(j.Payload, j.Payload.Name)
}
