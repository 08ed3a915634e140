// Package unique makes the random parts of the names the lab's runs
// declare on a shared broker, so that runs and tests never meet.
package unique

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns 8 random hexadecimal digits.
func Hex() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
