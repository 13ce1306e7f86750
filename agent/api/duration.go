package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// MarshalJSON writes the duration as time.Duration.String does ("168h0m0s"),
// which a person reading /v1/info understands and ParseDuration reads back.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "168h0m0s", and a bare number as nanoseconds (what
// a time.Duration field would have written).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: want a string like \"1h0m0s\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
