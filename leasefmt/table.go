package leasefmt

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// TableSchema is the schema string of the TABLE header.
const TableSchema = "lease.table/v1"

// Table is the TABLE header: the shard counts are fixed when the table is
// created and are authoritative from then on. Groups use TargetShards.
type Table struct {
	WorkShards   int
	TargetShards int
	CreatedAt    float64
	Extra        []Field
}

// Shards is the shard count of the directory of records of kind k.
func (t *Table) Shards(k Kind) int {
	if k == Work {
		return t.WorkShards
	}
	return t.TargetShards
}

// ShardDir is the table-relative directory of shard sh of kind k,
// KIND/SS.
func (t *Table) ShardDir(k Kind, sh int) string {
	return k.Dir() + "/" + ShardDirName(sh, t.Shards(k))
}

// RecordPath is the table-relative path of the record of id of kind k,
// KIND/SS/ID.json.
func (t *Table) RecordPath(k Kind, id ID) string {
	return t.ShardDir(k, id.Shard(t.Shards(k))) + "/" + id.FileName()
}

// DecodeTable reads and validates a TABLE header.
func DecodeTable(data []byte) (*Table, error) {
	if len(data) > MaxRecordSize {
		return nil, bad("", "header is %d bytes, more than %d", len(data), MaxRecordSize)
	}
	o, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	schema, err := o.str("schema")
	if err != nil {
		return nil, err
	}
	if schema != TableSchema {
		return nil, bad("schema", "is %s, want %q", Quote(schema), TableSchema)
	}
	t := &Table{}
	if t.WorkShards, err = o.shards("work_shards"); err != nil {
		return nil, err
	}
	if t.TargetShards, err = o.shards("target_shards"); err != nil {
		return nil, err
	}
	if t.CreatedAt, err = o.time("created_at"); err != nil {
		return nil, err
	}
	for _, key := range o.keys {
		switch key {
		case "schema", "work_shards", "target_shards", "created_at":
		default:
			var c bytes.Buffer
			_ = json.Compact(&c, o.vals[key])
			t.Extra = append(t.Extra, Field{Key: key, Value: c.Bytes()})
		}
	}
	return t, nil
}

func (o *object) shards(key string) (int, error) {
	raw, ok := o.vals[key]
	if !ok {
		return 0, bad(key, "missing")
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 1 || n > MaxShards {
		return 0, bad(key, "not an integer in [1, %d]", MaxShards)
	}
	return n, nil
}

// EncodeTable renders the TABLE header.
func EncodeTable(t *Table) ([]byte, error) {
	if t.WorkShards < 1 || t.WorkShards > MaxShards || t.TargetShards < 1 || t.TargetShards > MaxShards {
		return nil, bad("work_shards", "shard counts must be in [1, %d]", MaxShards)
	}
	if err := CheckTime("created_at", t.CreatedAt); err != nil {
		return nil, bad("created_at", "%v", err)
	}
	b := []byte(`{"schema":"` + TableSchema + `","work_shards":`)
	b = strconv.AppendInt(b, int64(t.WorkShards), 10)
	b = append(b, `,"target_shards":`...)
	b = strconv.AppendInt(b, int64(t.TargetShards), 10)
	b = append(b, `,"created_at":`...)
	b = AppendTime(b, t.CreatedAt)
	for _, f := range t.Extra {
		b = append(b, ',')
		b = appendString(b, f.Key)
		b = append(b, ':')
		b = append(b, f.Value...)
	}
	return append(b, "}\n"...), nil
}
