package topology

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/topology.md")

// TestDocIsCurrent keeps docs/topology.md in step with the code.
func TestDocIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDoc(&b); err != nil {
		t.Fatal(err)
	}
	const path = "../../../docs/topology.md"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make docs)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("%s is stale: run make docs", path)
	}
}
