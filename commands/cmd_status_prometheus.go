package commands

import (
	"io"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/qualify"
)

// lease status --summary -o prometheus: the census in the Prometheus text
// exposition format, for node_exporter's textfile collector (the recipe is
// in lease-status(1)). Every sample carries the table's root as label
// root, so that the files of several tables can sit in one collector
// directory without clashing. The states of lease_items partition the
// items: free (queued, never claimed) and each status of a record.

// promFamily is one metric family: name, help, type, samples.
type promFamily struct {
	name, help string
	typ        dto.MetricType
	samples    []promSample
}

type promSample struct {
	labels [][2]string
	value  float64
}

// writePrometheus writes cen (and the inodes, when known) to w, counted at
// now in durationS seconds.
func writePrometheus(w io.Writer, root string, cen census.Census, ino *qualify.Inodes, now, durationS float64) error {
	items := promFamily{name: "lease_items", typ: dto.MetricType_GAUGE,
		help: "Work items of the table by state: free (queued, never claimed), leased, expired, committing, released, done, failed, corrupt (a record that does not validate)."}
	for _, s := range []struct {
		state string
		n     int64
	}{{"free", cen.Free}, {"leased", cen.Leased}, {"expired", cen.Expired}, {"committing", cen.Committing},
		{"released", cen.Released}, {"done", cen.Done}, {"failed", cen.Failed}, {"corrupt", cen.Corrupt}} {
		items.samples = append(items.samples, promSample{[][2]string{{"state", s.state}}, float64(s.n)})
	}
	owners := make([]string, 0, len(cen.Owners))
	for o := range cen.Owners {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	perOwner := promFamily{name: "lease_owner_live_leases", typ: dto.MetricType_GAUGE,
		help: "Live leases (leased or committing, not expired) per owner."}
	for _, o := range owners {
		perOwner.samples = append(perOwner.samples, promSample{[][2]string{{"owner", o}}, float64(cen.Owners[o])})
	}
	fams := []promFamily{
		items,
		{name: "lease_queue_entries", typ: dto.MetricType_GAUGE, help: "Entries of the queue: items not done (nor failed).",
			samples: []promSample{{nil, float64(cen.Queued)}}},
		{name: "lease_records", typ: dto.MetricType_GAUGE, help: "Work records that validate (items claimed at least once).",
			samples: []promSample{{nil, float64(cen.Records)}}},
		{name: "lease_attempts_total", typ: dto.MetricType_COUNTER,
			help:    "Failed runs recorded in the work records (lease retry clears an item's: a counter reset).",
			samples: []promSample{{nil, float64(cen.Attempts)}}},
		{name: "lease_retried_items", typ: dto.MetricType_GAUGE, help: "Items not done or failed that had a failed run.",
			samples: []promSample{{nil, float64(cen.Retried)}}},
		{name: "lease_owners", typ: dto.MetricType_GAUGE, help: "Owners holding at least one live lease.",
			samples: []promSample{{nil, float64(len(owners))}}},
		perOwner,
	}
	if ino != nil && ino.Known {
		fams = append(fams,
			promFamily{name: "lease_filesystem_files_free", typ: dto.MetricType_GAUGE,
				help: "Free inodes of the table's filesystem (each new item takes two).", samples: []promSample{{nil, float64(ino.Free)}}},
			promFamily{name: "lease_filesystem_files", typ: dto.MetricType_GAUGE,
				help: "Inodes of the table's filesystem.", samples: []promSample{{nil, float64(ino.Total)}}})
	}
	fams = append(fams,
		promFamily{name: "lease_census_timestamp_seconds", typ: dto.MetricType_GAUGE,
			help: "When the summary was counted, in seconds since the Unix epoch.", samples: []promSample{{nil, now}}},
		promFamily{name: "lease_census_duration_seconds", typ: dto.MetricType_GAUGE,
			help: "How long counting the summary took.", samples: []promSample{{nil, durationS}}})
	for _, f := range fams {
		mf := &dto.MetricFamily{Name: proto.String(f.name), Help: proto.String(f.help), Type: f.typ.Enum()}
		for _, s := range f.samples {
			m := &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("root"), Value: proto.String(root)}}}
			for _, l := range s.labels {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l[0]), Value: proto.String(l[1])})
			}
			if f.typ == dto.MetricType_COUNTER {
				m.Counter = &dto.Counter{Value: proto.Float64(s.value)}
			} else {
				m.Gauge = &dto.Gauge{Value: proto.Float64(s.value)}
			}
			mf.Metric = append(mf.Metric, m)
		}
		if len(mf.Metric) == 0 {
			continue // no owner holds a lease: the text format has no empty family
		}
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return nil
}
