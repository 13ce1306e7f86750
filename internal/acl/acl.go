// Package acl grants one user access to a file or directory through a
// POSIX access ACL (the system.posix_acl_access extended attribute, as
// setfacl -m u:UID:PERM writes it), without a group that others may share.
// A root-written bundle of a user's job is readable by that user and by
// nobody else that way.
package acl

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Perm is rwx as in a mode's bits for one class.
type Perm uint16

const (
	Read    Perm = 4
	Write   Perm = 2
	Execute Perm = 1
)

// Tags and the attribute's layout (linux/posix_acl_xattr.h).
const (
	xattrName    = "system.posix_acl_access"
	xattrVersion = 2
	tagUserObj   = 0x01
	tagUser      = 0x02
	tagGroupObj  = 0x04
	tagMask      = 0x10
	tagOther     = 0x20
	undefinedID  = 0xffffffff
)

// GrantUser gives uid perm on path, keeping the owner's, group's and
// others' permissions as the mode has them: the ACL's mask admits the
// user's entry and the group's bits, nothing more. It replaces any access
// ACL path had. An error says the file system keeps no ACLs (or path is
// gone).
func GrantUser(path string, uid int, perm Perm) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s: a symbolic link", path)
	}
	mode := uint16(fi.Mode().Perm())
	owner, group, other := Perm(mode>>6&7), Perm(mode>>3&7), Perm(mode&7)
	entry := func(tag uint16, p Perm, id uint32) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint16(b[0:], tag)
		binary.LittleEndian.PutUint16(b[2:], uint16(p))
		binary.LittleEndian.PutUint32(b[4:], id)
		return b
	}
	buf := binary.LittleEndian.AppendUint32(nil, xattrVersion)
	// Entries in the order the kernel requires: owner, named users by id,
	// owning group, mask, others.
	buf = append(buf, entry(tagUserObj, owner, undefinedID)...)
	buf = append(buf, entry(tagUser, perm, uint32(uid))...)
	buf = append(buf, entry(tagGroupObj, group, undefinedID)...)
	buf = append(buf, entry(tagMask, group|perm, undefinedID)...)
	buf = append(buf, entry(tagOther, other, undefinedID)...)
	if err := unix.Lsetxattr(path, xattrName, buf, 0); err != nil {
		return fmt.Errorf("%s: setting an ACL for uid %d: %w", path, uid, err)
	}
	return nil
}
