// Reads a cosigned checkpoint note on stdin and a note verifier key as the
// first argument, and opens the note with golang.org/x/mod/sumdb/note (a
// signed-note implementation this project did not write). Prints one JSON
// object: the text, the names of the signatures that verified, and those left
// unverified (keys it does not know). A second argument, if given, is tried
// as a verifier key too and the error it gives is reported.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/note"
)

type result struct {
	Text       string   `json:"text"`
	Verified   []string `json:"verified"`
	Unverified []string `json:"unverified"`
	Error      string   `json:"error,omitempty"`
	OtherKey   string   `json:"other_key_error,omitempty"`
}

func main() {
	msg, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	out := result{Verified: []string{}, Unverified: []string{}}
	verifier, err := note.NewVerifier(os.Args[1])
	if err != nil {
		out.Error = "verifier: " + err.Error()
	} else if n, err := note.Open(msg, note.VerifierList(verifier)); err != nil {
		out.Error = err.Error()
	} else {
		out.Text = n.Text
		for _, s := range n.Sigs {
			out.Verified = append(out.Verified, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		for _, s := range n.UnverifiedSigs {
			out.Unverified = append(out.Unverified, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
	}
	if len(os.Args) > 2 {
		if _, err := note.NewVerifier(os.Args[2]); err != nil {
			out.OtherKey = err.Error()
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
