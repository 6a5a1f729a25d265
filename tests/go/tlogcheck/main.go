// Command tlogcheck reads a C2SP tlog-tiles directory with Go's
// golang.org/x/mod/sumdb/tlog and note packages, which the ledger did not
// write, and checks it from the tiles alone:
//
//   - the checkpoint's signature, with the log's note verifier key;
//   - every entry of every entry bundle hashes (RFC 6962 leaf hash) to its
//     hash in the level-0 tiles, read through tlog.TileHashReader (which
//     authenticates every tile it reads against the signed tree hash);
//   - an inclusion proof (tlog.ProveRecord, tlog.CheckRecord) for each sampled
//     entry index;
//   - with -old, a consistency proof (tlog.ProveTree, tlog.CheckTree) from an
//     older checkpoint of the same log to the directory's.
//
// With -leaves FILE (an archive's archived.txt: "position row stream version
// leaf-hash-hex" a line), the directory holds hash tiles only: each listed
// leaf hash is checked against the authenticated level-0 tiles at its
// position, instead of the entry bundles.
//
// With -proof FILE instead of -dir, it checks one C2SP tlog-proof file: its
// checkpoint's signature, and its entry (the extra line) at its index under
// that checkpoint's root (tlog.CheckRecord), with nothing else.
//
// x/mod names tiles tile/<H>/<L>/<N>; with height 8 that is the C2SP path
// tile/<L>/<N> with "8/" added, so every path is turned into the other and
// parsed back with tlog.ParseTilePath.
//
// Usage: tlogcheck -dir DIR -vkey NAME+HASH+KEY [-old FILE] [-sample 3,17,400]
//
//	tlogcheck -proof FILE -vkey NAME+HASH+KEY
//
// It prints one OK line per check and exits 1 at the first failure.
package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

type checkpoint struct {
	origin string
	tree   tlog.Tree
}

// openCheckpoint verifies a signed note and reads origin, size and root.
func openCheckpoint(path string, verifier note.Verifier) (checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return checkpoint{}, err
	}
	n, err := note.Open(data, note.VerifierList(verifier))
	if err != nil {
		return checkpoint{}, fmt.Errorf("%s: %v", path, err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		return checkpoint{}, fmt.Errorf("%s: not a checkpoint", path)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return checkpoint{}, fmt.Errorf("%s: bad tree size %q", path, lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return checkpoint{}, fmt.Errorf("%s: bad root hash %q", path, lines[2])
	}
	var h tlog.Hash
	copy(h[:], root)
	return checkpoint{origin: lines[0], tree: tlog.Tree{N: size, Hash: h}}, nil
}

// c2spPath turns x/mod's tile path into the C2SP one, checking the round trip.
func c2spPath(t tlog.Tile) (string, error) {
	path := t.Path()
	parsed, err := tlog.ParseTilePath(path)
	if err != nil || parsed != t {
		return "", fmt.Errorf("tile path %q does not parse back", path)
	}
	prefix := fmt.Sprintf("tile/%d/", height)
	if !strings.HasPrefix(path, prefix) {
		return "", fmt.Errorf("tile path %q has another height", path)
	}
	return "tile/" + strings.TrimPrefix(path, prefix), nil
}

// dirTiles serves tiles from the directory and nothing else.
type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return height }

func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		path, err := c2spPath(t)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(path)))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (d dirTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// bundlePath is the C2SP entry bundle holding entry index i of a tree of size n.
func bundlePath(i, n int64) string {
	t := tlog.Tile{H: height, L: 0, N: i >> height, W: 1 << height}
	if end := (t.N + 1) << height; end > n {
		t.W = int(n - t.N<<height)
	}
	path, _ := c2spPath(t)
	return "tile/entries/" + strings.TrimPrefix(path, "tile/0/")
}

// readBundle splits a bundle into its uint16 length-prefixed entries.
func readBundle(dir, path string) ([][]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return nil, err
	}
	var entries [][]byte
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, fmt.Errorf("%s: truncated length", path)
		}
		n := int(data[0])<<8 | int(data[1])
		if len(data) < 2+n {
			return nil, fmt.Errorf("%s: truncated entry %d", path, len(entries))
		}
		entries = append(entries, data[2:2+n])
		data = data[2+n:]
	}
	return entries, nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tlogcheck: "+format+"\n", args...)
	os.Exit(1)
}

// checkProof checks a tlog-proof file with the note and tlog packages.
func checkProof(path string, verifier note.Verifier) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	head, signed, found := strings.Cut(string(data), "\n\n")
	if !found {
		fail("%s: no empty line before the checkpoint", path)
	}
	lines := strings.Split(head, "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		fail("%s: not a c2sp.org/tlog-proof@v1", path)
	}
	lines = lines[1:]
	var entry []byte
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		entry, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(lines[0], "extra "))
		if err != nil {
			fail("%s: bad extra line", path)
		}
		lines = lines[1:]
	}
	if entry == nil {
		fail("%s: no entry to check (no extra line)", path)
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		fail("%s: no index line", path)
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "index "), 10, 64)
	if err != nil || index < 0 {
		fail("%s: bad index", path)
	}
	var proof tlog.RecordProof
	for _, line := range lines[1:] {
		h, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(h) != tlog.HashSize {
			fail("%s: bad proof hash %q", path, line)
		}
		var hash tlog.Hash
		copy(hash[:], h)
		proof = append(proof, hash)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(verifier))
	if err != nil {
		fail("%s: checkpoint: %v", path, err)
	}
	text := strings.Split(n.Text, "\n")
	size, err := strconv.ParseInt(text[1], 10, 64)
	if err != nil {
		fail("%s: bad tree size", path)
	}
	root, err := tlog.ParseHash(text[2])
	if err != nil {
		fail("%s: bad root", path)
	}
	if err := tlog.CheckRecord(proof, size, root, index, tlog.RecordHash(entry)); err != nil {
		fail("%s: inclusion of %d: %v", path, index, err)
	}
	fmt.Printf("OK entry %d is in the tree of size %d of %s\n", index, size, text[0])
}

// checkLeaves checks each "position row stream version leaf-hex" line's leaf
// hash against the authenticated level-0 hashes, and proves its inclusion.
func checkLeaves(path string, tree tlog.Tree, reader tlog.HashReader) {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	count := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		fields := strings.Split(line, " ")
		if len(fields) != 5 {
			fail("%s: %q is not a listed leaf", path, line)
		}
		i, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || i < 0 || i >= tree.N {
			fail("%s: position %q is not in the tree", path, fields[0])
		}
		hashes, err := reader.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
		if err != nil {
			fail("reading the level-0 tile of %d: %v", i, err)
		}
		if fmt.Sprintf("%x", hashes[0][:]) != fields[4] {
			fail("%s: the leaf at %d is not the listed one", path, i)
		}
		proof, err := tlog.ProveRecord(tree.N, i, reader)
		if err != nil {
			fail("inclusion proof of %d: %v", i, err)
		}
		if err := tlog.CheckRecord(proof, tree.N, tree.Hash, i, hashes[0]); err != nil {
			fail("inclusion of %d: %v", i, err)
		}
		count++
	}
	fmt.Printf("OK %d listed leaves are in the tree of size %d, each proven\n", count, tree.N)
}

func main() {
	dir := flag.String("dir", "", "the tiles directory")
	proofFile := flag.String("proof", "", "a tlog-proof file to check (instead of -dir)")
	vkey := flag.String("vkey", "", "the log's note verifier key")
	old := flag.String("old", "", "an older checkpoint file of the same log")
	sample := flag.String("sample", "", "entry indexes to prove, comma-separated")
	leaves := flag.String("leaves", "", "an archive's archived.txt: its leaves, not entry bundles")
	flag.Parse()
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	if *proofFile != "" {
		checkProof(*proofFile, verifier)
		return
	}
	cp, err := openCheckpoint(filepath.Join(*dir, "checkpoint"), verifier)
	if err != nil {
		fail("%v", err)
	}
	tree := cp.tree
	fmt.Printf("OK checkpoint %s size %d signed by %s\n", cp.origin, tree.N, verifier.Name())
	reader := tlog.TileHashReader(tree, dirTiles{*dir})
	if *leaves != "" {
		checkLeaves(*leaves, tree, reader)
		return
	}

	// Every entry against the authenticated level-0 hashes.
	for start := int64(0); start < tree.N; start += 1 << height {
		path := bundlePath(start, tree.N)
		entries, err := readBundle(*dir, path)
		if err != nil {
			fail("%v", err)
		}
		indexes := []int64{}
		for i := start; i < tree.N && i < start+1<<height; i++ {
			indexes = append(indexes, tlog.StoredHashIndex(0, i))
		}
		if len(entries) != len(indexes) {
			fail("%s holds %d entries, not %d", path, len(entries), len(indexes))
		}
		hashes, err := reader.ReadHashes(indexes)
		if err != nil {
			fail("reading the level-0 tile of %s: %v", path, err)
		}
		for k, entry := range entries {
			if tlog.RecordHash(entry) != hashes[k] {
				fail("%s entry %d does not hash to its tile's leaf hash", path, k)
			}
		}
	}
	fmt.Printf("OK every entry of %d entries hashes to its leaf in the tiles\n", tree.N)

	if *sample != "" {
		for _, field := range strings.Split(*sample, ",") {
			i, err := strconv.ParseInt(field, 10, 64)
			if err != nil || i < 0 || i >= tree.N {
				fail("sample index %q is not in the tree", field)
			}
			entries, err := readBundle(*dir, bundlePath(i, tree.N))
			if err != nil {
				fail("%v", err)
			}
			proof, err := tlog.ProveRecord(tree.N, i, reader)
			if err != nil {
				fail("inclusion proof of %d: %v", i, err)
			}
			leaf := tlog.RecordHash(entries[i%(1<<height)])
			if err := tlog.CheckRecord(proof, tree.N, tree.Hash, i, leaf); err != nil {
				fail("inclusion of %d: %v", i, err)
			}
			fmt.Printf("OK entry %d is in the tree of size %d (%d proof hashes)\n", i, tree.N, len(proof))
		}
	}

	if *old != "" {
		was, err := openCheckpoint(*old, verifier)
		if err != nil {
			fail("%v", err)
		}
		if was.origin != cp.origin {
			fail("the old checkpoint is of log %q, not %q", was.origin, cp.origin)
		}
		proof, err := tlog.ProveTree(tree.N, was.tree.N, reader)
		if err != nil {
			fail("consistency proof from %d: %v", was.tree.N, err)
		}
		if err := tlog.CheckTree(proof, tree.N, tree.Hash, was.tree.N, was.tree.Hash); err != nil {
			fail("consistency from %d to %d: %v", was.tree.N, tree.N, err)
		}
		fmt.Printf("OK the tree of size %d extends the one of size %d (%d proof hashes)\n", tree.N, was.tree.N, len(proof))
	}
}
