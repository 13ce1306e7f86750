package evidence

import (
	"fmt"

	"github.com/kcrash/kcrash/evidence/detail"
)

// Details are a finding's fields particular to its source and kind: a JSON
// object in manifest.json, free-form because signatures add their own keys.
// Code that reads a detail another package wrote goes through the typed
// accessors and the keys of package detail.
type Details map[string]any

// Text returns k as text: a string as it is, a number or bool in its decimal
// form, "" when absent.
func (d Details) Text(k detail.Text) string {
	switch v := d[string(k)].(type) {
	case string:
		return v
	case int, int64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

// Int returns k when it holds an int64, as every writer of an Int key stores it.
func (d Details) Int(k detail.Int) (int64, bool) {
	v, ok := d[string(k)].(int64)
	return v, ok
}

// Bool returns k when it holds true.
func (d Details) Bool(k detail.Bool) bool {
	v, _ := d[string(k)].(bool)
	return v
}

// SetText, SetInt and SetBool write k; d must not be nil.
func (d Details) SetText(k detail.Text, v string) { d[string(k)] = v }
func (d Details) SetInt(k detail.Int, v int64)    { d[string(k)] = v }
func (d Details) SetBool(k detail.Bool, v bool)   { d[string(k)] = v }
