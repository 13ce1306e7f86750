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

// githubUploader comments on an issue or pull request. GitHub's REST API
// cannot attach files, so the comment links to a copy put elsewhere
// (--bundle-url, or an earlier --to https://... target).
type githubUploader struct{}

type githubConf struct {
	api  string
	cred credential
}

func githubConfig(j *Job) (githubConf, error) {
	c := githubConf{api: strings.TrimRight(j.env("GITHUB_API_URL"), "/")}
	if c.api == "" {
		c.api = "https://api.github.com"
	}
	if !strings.HasPrefix(c.api, "https://") && !strings.HasPrefix(c.api, "http://") {
		return c, fmt.Errorf("GITHUB_API_URL must start with https:// (Enterprise: https://HOST/api/v3)")
	}
	c.cred = credential{header: "Authorization", scheme: "Bearer ", from: "GITHUB_TOKEN", value: j.env("GITHUB_TOKEN")}
	if err := j.requireCred(&c.cred, "GITHUB_TOKEN is not set (a token with Issues: write, or the repo scope)"); err != nil {
		return c, err
	}
	insecure(j, c.api, "GITHUB_API_URL")
	return c, nil
}

func githubHeaders(c githubConf) http.Header {
	h := http.Header{}
	c.cred.set(h)
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	return h
}

func (githubUploader) commentsURL(c githubConf, j *Job) string {
	return c.api + "/repos/" + ownerRepoPath(j.Target.Project) + "/issues/" + strconv.Itoa(j.Target.Number) + "/comments"
}

func githubText(j *Job) string {
	link := ""
	if j.Opts.BundleURL != "" {
		link = fmt.Sprintf("[%s](%s)", j.Payload.Name, j.Opts.BundleURL)
	}
	return markdownComment(j.Payload, link, githubCommentLimit)
}

func (u githubUploader) commentRequest(c githubConf, j *Job) (*request, error) {
	r, err := jsonRequest("POST", u.commentsURL(c, j), map[string]any{"body": githubText(j)})
	if err != nil {
		return nil, err
	}
	for k, v := range githubHeaders(c) {
		r.header[k] = v
	}
	r.what = "comment"
	return r, nil
}

func (u githubUploader) linkWarning(j *Job) {
	if j.Opts.BundleURL == "" {
		j.warn("GitHub cannot hold attachments: the comment names the bundle and its host only; put it somewhere first (--to https://... before github:) or pass --bundle-url to link it")
	}
}

func (u githubUploader) Plan(j *Job) ([]Step, error) {
	c, err := githubConfig(j)
	if err != nil {
		return nil, err
	}
	u.linkWarning(j)
	r, err := u.commentRequest(c, j)
	if err != nil {
		return nil, err
	}
	return []Step{
		planStep("only when a try failed without an answer: look for the comment before posting again", "GET", u.commentsURL(c, j)+"?since=<start of the upload>&per_page=100", c.cred, nil, ""),
		withComment(planStep("comment with the verdict, the summary and the bundle's link", "POST", r.url, c.cred, r.header, jsonBodyDesc(r)), githubText(j)),
	}, nil
}

func (u githubUploader) Upload(ctx context.Context, j *Job) error {
	c, err := githubConfig(j)
	if err != nil {
		return err
	}
	u.linkWarning(j)
	if j.Opts.BundleURL != "" {
		j.Result.Attachment = &Created{Name: j.Payload.Name, URL: j.Opts.BundleURL}
	}
	// Clocks disagree; ten minutes of slack costs one page at most.
	since := j.start.Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	cm, err := retry(ctx, j, "comment", func(try int) (*Created, error) {
		if try > 1 {
			lr := &request{method: "GET", url: u.commentsURL(c, j) + "?since=" + url.QueryEscape(since) + "&per_page=100", header: githubHeaders(c), what: "comment lookup"}
			if resp, ok, err := j.lookup(ctx, lr); err != nil {
				return nil, err
			} else if ok {
				if cm := reusedComment(resp, j.Payload.SHA256); cm != nil {
					return cm, nil
				}
			}
		}
		r, err := u.commentRequest(c, j)
		if err != nil {
			return nil, err
		}
		return j.sendComment(ctx, r, 201)
	})
	if err != nil {
		return err
	}
	j.Result.Comment = cm
	return nil
}
