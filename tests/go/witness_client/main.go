// A log written with golang.org/x/mod/sumdb/{note,tlog} (code this project did
// not write) that asks a witness for cosignatures over C2SP tlog-witness, and
// checks each cosignature by tlog-cosignature's definition with Go's own
// crypto/ed25519.
//
// Usage: main <witness URL> <witness verifier key>. It prints its log's note
// verifier key on the first line, waits for a line on stdin (the test has
// configured the witness), then runs the exchange and prints one JSON object.
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const origin = "go.example/log"

type exchange struct {
	Old, Size   int64
	Status      int
	ContentType string
	Body        string
	Cosigned    bool   // a cosignature line by the witness's key that verifies
	Timestamp   uint64 // its timestamp
	Problem     string `json:",omitempty"`
}

type store struct{ hashes []tlog.Hash }

func (s *store) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, index := range indexes {
		out[i] = s.hashes[index]
	}
	return out, nil
}

func (s *store) add(n int64, data []byte) {
	hashes, err := tlog.StoredHashes(n, data, s)
	if err != nil {
		panic(err)
	}
	s.hashes = append(s.hashes, hashes...)
}

func newLog(records int64, altered int64) *store {
	s := &store{}
	for n := int64(0); n < records; n++ {
		data := fmt.Sprintf("record %d", n)
		if n == altered {
			data = "rewritten"
		}
		s.add(n, []byte(data))
	}
	return s
}

func main() {
	witnessURL, witnessKey := os.Args[1], os.Args[2]
	skey, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 32)), origin)
	if err != nil {
		panic(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		panic(err)
	}
	fmt.Println(vkey)
	bufio.NewReader(os.Stdin).ReadString('\n')

	name, keyID, public := parseWitnessKey(witnessKey)
	honest := newLog(40, -1)
	forked := newLog(40, 3)
	var results []exchange
	submit := func(s *store, old, size int64) {
		root, err := tlog.TreeHash(size, s)
		if err != nil {
			panic(err)
		}
		text := fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(root[:]))
		signed, err := note.Sign(&note.Note{Text: text}, signer)
		if err != nil {
			panic(err)
		}
		var body bytes.Buffer
		fmt.Fprintf(&body, "old %d\n", old)
		if old > 0 && old < size {
			proof, err := tlog.ProveTree(size, old, s)
			if err != nil {
				panic(err)
			}
			for _, h := range proof {
				fmt.Fprintf(&body, "%s\n", base64.StdEncoding.EncodeToString(h[:]))
			}
		}
		body.WriteString("\n")
		body.Write(signed)
		response, err := http.Post(witnessURL+"/add-checkpoint", "text/plain", &body)
		if err != nil {
			panic(err)
		}
		answer, _ := io.ReadAll(response.Body)
		response.Body.Close()
		result := exchange{Old: old, Size: size, Status: response.StatusCode,
			ContentType: response.Header.Get("Content-Type"), Body: string(answer)}
		if response.StatusCode == 200 {
			result.Timestamp, result.Cosigned, result.Problem = checkCosignature(string(answer), text, name, keyID, public)
		}
		results = append(results, result)
	}
	submit(honest, 0, 5)   // first contact: cosigned
	submit(honest, 0, 13)  // a stale old size: 409 with the witness's size
	submit(honest, 5, 13)  // with the consistency proof from 5: cosigned
	submit(forked, 13, 40) // a rewritten history of the same log: 422
	submit(honest, 13, 40) // the honest log goes on: cosigned
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}

// parseWitnessKey reads name+keyID+base64(0x04 || key), checking the type and the ID.
func parseWitnessKey(vkey string) (string, []byte, ed25519.PublicKey) {
	parts := strings.SplitN(vkey, "+", 3)
	typed, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(typed) != 33 || typed[0] != 0x04 {
		panic("not a cosignature/v1 key")
	}
	id := keyIDOf(parts[0], typed[1:])
	if fmt.Sprintf("%x", id) != parts[1] {
		panic("key ID mismatch")
	}
	return parts[0], id, ed25519.PublicKey(typed[1:])
}

func keyIDOf(name string, public []byte) []byte {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{0x04})
	h.Write(public)
	return h.Sum(nil)[:4]
}

// checkCosignature finds the witness's line and verifies it as tlog-cosignature defines.
func checkCosignature(answer, text, name string, keyID []byte, public ed25519.PublicKey) (uint64, bool, string) {
	for _, line := range strings.Split(strings.TrimSuffix(answer, "\n"), "\n") {
		fields := strings.Split(line, " ")
		if len(fields) != 3 || fields[0] != "\u2014" || fields[1] != name {
			continue
		}
		blob, err := base64.StdEncoding.DecodeString(fields[2])
		if err != nil || len(blob) != 76 || !bytes.Equal(blob[:4], keyID) {
			return 0, false, "not a 76-byte cosignature with the witness's key ID"
		}
		timestamp := binary.BigEndian.Uint64(blob[4:12])
		message := fmt.Sprintf("cosignature/v1\ntime %d\n%s", timestamp, text)
		if !ed25519.Verify(public, []byte(message), blob[12:]) {
			return timestamp, false, "the signature does not verify"
		}
		return timestamp, true, ""
	}
	return 0, false, "no line of the witness"
}
