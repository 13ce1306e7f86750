package main

import (
	"bytes"
	"fmt"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// Validate checks every document of a YAML stream.
func Validate(data []byte) []error {
	var errs []error
	n := 0
	for i, doc := range docSep.Split(string(data), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		n++
		for _, e := range validateDoc([]byte(doc)) {
			errs = append(errs, fmt.Errorf("document %d: %w", i+1, e))
		}
	}
	if n == 0 {
		errs = append(errs, fmt.Errorf("no document"))
	}
	return errs
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func validateDoc(doc []byte) []error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return []error{err}
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 DaemonSet":
		var ds appsv1.DaemonSet
		if err := yaml.UnmarshalStrict(doc, &ds); err != nil {
			return []error{err}
		}
		return asErrors(checkDaemonSet(&ds))
	case "v1 Pod":
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(doc, &pod); err != nil {
			return []error{err}
		}
		return asErrors(checkPod(&pod))
	case "v1 Namespace":
		var ns corev1.Namespace
		if err := yaml.UnmarshalStrict(doc, &ns); err != nil {
			return []error{err}
		}
		return asErrors(checkName(field.NewPath("metadata", "name"), ns.Name, validation.IsDNS1123Label))
	}
	return []error{fmt.Errorf("apiVersion %q kind %q: not a type this validator knows", tm.APIVersion, tm.Kind)}
}

func checkName(p *field.Path, name string, rule func(string) []string) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return append(errs, field.Required(p, ""))
	}
	for _, msg := range rule(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// checkMeta checks an object's own metadata: its name, namespace and labels.
func checkMeta(om *metav1.ObjectMeta) field.ErrorList {
	var errs field.ErrorList
	md := field.NewPath("metadata")
	errs = append(errs, checkName(md.Child("name"), om.Name, validation.IsDNS1123Subdomain)...)
	if om.Namespace != "" {
		errs = append(errs, checkName(md.Child("namespace"), om.Namespace, validation.IsDNS1123Label)...)
	}
	return append(errs, checkLabels(md.Child("labels"), om.Labels)...)
}

func checkDaemonSet(ds *appsv1.DaemonSet) field.ErrorList {
	errs := checkMeta(&ds.ObjectMeta)
	spec := field.NewPath("spec")
	tmpl := spec.Child("template")
	errs = append(errs, checkLabels(tmpl.Child("metadata", "labels"), ds.Spec.Template.Labels)...)
	switch sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector); {
	case ds.Spec.Selector == nil:
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	case err != nil:
		errs = append(errs, field.Invalid(spec.Child("selector"), ds.Spec.Selector, err.Error()))
	case sel.Empty():
		errs = append(errs, field.Invalid(spec.Child("selector"), ds.Spec.Selector, "empty selector is invalid for a DaemonSet"))
	case !sel.Matches(labels.Set(ds.Spec.Template.Labels)):
		errs = append(errs, field.Invalid(tmpl.Child("metadata", "labels"), ds.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if p := ds.Spec.Template.Spec.RestartPolicy; p != "" && p != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmpl.Child("spec", "restartPolicy"), p, []string{string(corev1.RestartPolicyAlways)}))
	}
	return append(errs, checkPodSpec(tmpl.Child("spec"), &ds.Spec.Template.Spec)...)
}

func checkPod(pod *corev1.Pod) field.ErrorList {
	errs := checkMeta(&pod.ObjectMeta)
	spec := field.NewPath("spec")
	switch p := pod.Spec.RestartPolicy; p {
	case "", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p, []string{"Always", "OnFailure", "Never"}))
	}
	return append(errs, checkPodSpec(spec, &pod.Spec)...)
}

func checkLabels(p *field.Path, ls map[string]string) field.ErrorList {
	var errs field.ErrorList
	for k, v := range ls {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

func checkPodSpec(p *field.Path, ps *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	vols := map[string]bool{}
	for i, v := range ps.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, checkName(vp.Child("name"), v.Name, validation.IsDNS1123Label)...)
		if vols[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		vols[v.Name] = true
		if hp := v.HostPath; hp != nil {
			if hp.Path == "" {
				errs = append(errs, field.Required(vp.Child("hostPath", "path"), ""))
			}
			if hp.Type != nil && !hostPathTypes[*hp.Type] {
				errs = append(errs, field.NotSupported(vp.Child("hostPath", "type"), *hp.Type, []corev1.HostPathType{corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}))
			}
		}
	}
	if len(ps.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names := map[string]bool{}
	for i, c := range ps.Containers {
		cp := p.Child("containers").Index(i)
		errs = append(errs, checkName(cp.Child("name"), c.Name, validation.IsDNS1123Label)...)
		if names[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names[c.Name] = true
		if c.Image == "" {
			errs = append(errs, field.Required(cp.Child("image"), ""))
		}
		switch mp := c.TerminationMessagePolicy; mp {
		case "", corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
		default:
			errs = append(errs, field.NotSupported(cp.Child("terminationMessagePolicy"), mp, []string{"File", "FallbackToLogsOnError"}))
		}
		mounts := map[string]bool{}
		for j, m := range c.VolumeMounts {
			mp := cp.Child("volumeMounts").Index(j)
			if !vols[m.Name] {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if m.MountPath == "" {
				errs = append(errs, field.Required(mp.Child("mountPath"), ""))
			} else if mounts[m.MountPath] {
				errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
			}
			mounts[m.MountPath] = true
		}
		for name, q := range c.Resources.Limits {
			if req, ok := c.Resources.Requests[name]; ok && req.Cmp(q) > 0 {
				errs = append(errs, field.Invalid(cp.Child("resources", "requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+q.String()))
			}
		}
	}
	for i, t := range ps.Tolerations {
		tp := p.Child("tolerations").Index(i)
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
		if t.Operator != "" && t.Operator != corev1.TolerationOpExists && t.Operator != corev1.TolerationOpEqual {
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
	}
	return errs
}

var hostPathTypes = map[corev1.HostPathType]bool{
	corev1.HostPathUnset: true, corev1.HostPathDirectoryOrCreate: true, corev1.HostPathDirectory: true,
	corev1.HostPathFileOrCreate: true, corev1.HostPathFile: true, corev1.HostPathSocket: true,
	corev1.HostPathCharDev: true, corev1.HostPathBlockDev: true,
}

func asErrors(l field.ErrorList) []error {
	var out []error
	for _, e := range l {
		out = append(out, e)
	}
	return out
}
