package checkpoint_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A statement signed with a key, checked against the public key the
// operator keeps, and the same statement with its seq changed.
func ExampleVerify() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // LoadOrCreateKey in real use
	head := ledger.Link{Seq: 1290, Hash: sha256.Sum256([]byte("entry 1290"))}
	st, err := checkpoint.Sign(key, head, time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	if err != nil {
		panic(err)
	}
	data, _ := st.Marshal()
	fmt.Print(string(data))

	trusted := key.Public().(ed25519.PublicKey)
	fmt.Println(checkpoint.Verify(st, trusted))
	st.Seq = 1291
	fmt.Println(checkpoint.Verify(st, trusted))
	// Output:
	// {
	//   "seq": 1290,
	//   "hash": "627671b2b5f9d6f21a5ece887918aca2d71a88b2731f7d443afcb2baabfcad9f",
	//   "at": "2026-12-06T09:00:00Z",
	//   "public_key": "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=",
	//   "signature": "JTTdXdwLnpwEPw0c6OooAdg8jLvwBnUHRXnM4xtAMXn5S4NDC3yCds/guAjctkzRTzUzTjA54CiKpQ2lFrPvAQ=="
	// }
	// <nil>
	// checkpoint: the signature does not match the statement's seq, hash and at: the statement was changed after it was signed, or was not signed with its public_key
}
