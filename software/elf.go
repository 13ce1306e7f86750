package software

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"io"

	"github.com/kcrash/kcrash/internal/readas"
)

// BuildID returns the GNU build id of an ELF file as hex, "" when it has
// none or is not ELF. Only the headers and the note are read, so a 1 GB
// libtorch costs a few pages.
func BuildID(path string) string { return buildID(path, follow) }

func buildID(path string, o readas.Opts) string {
	f, err := readas.Open(path, o)
	if err != nil {
		return ""
	}
	defer f.Close()
	return buildIDOf(&boundedReaderAt{r: f, left: maxELFRead})
}

// maxELFRead bounds what reading one file's build id reads: headers, the
// section names and a note are a few KiB even in a 2 GB libtorch; a crafted
// header asking for more ends the read.
const maxELFRead = 16 << 20

type boundedReaderAt struct {
	r    io.ReaderAt
	left int64
}

func (b *boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if int64(len(p)) > b.left {
		return 0, io.ErrUnexpectedEOF
	}
	b.left -= int64(len(p))
	return b.r.ReadAt(p, off)
}

func buildIDOf(r io.ReaderAt) string {
	ef, err := elf.NewFile(r)
	if err != nil {
		return ""
	}
	defer ef.Close()
	if s := ef.Section(".note.gnu.build-id"); s != nil {
		if id := noteBuildID(s.Open(), ef.ByteOrder, int64(s.Size)); id != "" {
			return id
		}
	}
	// Stripped of section headers: the program headers still point at the notes.
	for _, p := range ef.Progs {
		if p.Type == elf.PT_NOTE {
			if id := noteBuildID(p.Open(), ef.ByteOrder, int64(p.Filesz)); id != "" {
				return id
			}
		}
	}
	return ""
}

// noteBuildID walks ELF notes for NT_GNU_BUILD_ID (type 3, name "GNU").
func noteBuildID(r io.Reader, bo binary.ByteOrder, size int64) string {
	if size <= 0 || size > 1<<16 {
		return ""
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return ""
	}
	align := func(n uint32) int { return int((n + 3) &^ 3) }
	for len(b) >= 12 {
		nameSz, descSz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if align(nameSz)+align(descSz) > len(b) {
			return ""
		}
		name := b[:nameSz]
		desc := b[align(nameSz) : align(nameSz)+int(descSz)]
		if typ == 3 && string(name) == "GNU\x00" {
			return hex.EncodeToString(desc)
		}
		b = b[align(nameSz)+align(descSz):]
	}
	return ""
}
