package channel

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// uncheckedRequired returns the fields c's schema requires that its
// Check lets a part go without: the API would take with a 202 a part the
// published schema refuses. docs/template.md's example runs it too.
func uncheckedRequired(c Channel) ([]string, error) {
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(c.schema, &schema); err != nil {
		return nil, err
	}
	errs := c.check(reflect.New(c.part).Interface())
	var missing []string
	for _, field := range schema.Required {
		path := c.name + "." + field
		refused := false
		for _, e := range errs {
			if e.Field == path || strings.HasPrefix(e.Field, path+".") || strings.HasPrefix(e.Field, path+"[") {
				refused = true
			}
		}
		if !refused {
			missing = append(missing, field)
		}
	}
	return missing, nil
}

// TestCheckRefusesWhatTheSchemaRequires holds every channel's Check to
// its schema: a part without a field the schema requires is refused,
// naming that field.
func TestCheckRefusesWhatTheSchemaRequires(t *testing.T) {
	for _, c := range Builtin().All() {
		t.Run(c.Name(), func(t *testing.T) {
			missing, err := uncheckedRequired(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(missing) > 0 {
				t.Errorf("the %s schema requires %v, which Check does not refuse when missing", c.Name(), missing)
			}
		})
	}
}
