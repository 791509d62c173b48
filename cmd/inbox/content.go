package main

import (
	"github.com/spf13/pflag"

	"github.com/inbox-dev/inbox/spool"
)

// contentFlags are the flags of every command that writes a message.
type contentFlags struct {
	summary, body, bodyFile, payload, key  string
	artifacts, artifactKinds, artifactMeta []string
}

func (f *contentFlags) register(fs *pflag.FlagSet, summaryHelp string, withBody bool) {
	fs.StringVar(&f.summary, "summary", "", summaryHelp)
	if withBody {
		fs.StringVar(&f.body, "body", "", "message body (free text)")
		fs.StringVar(&f.bodyFile, "body-file", "", "read the body from a file (- for stdin)")
		fs.StringVar(&f.payload, "payload-json", "", "structured payload: one JSON value")
	}
	f.registerArtifacts(fs)
	fs.StringVar(&f.key, "idempotency-key", "", "retry-safe key: repeating the call with it returns the first result and writes nothing")
}

func (f *contentFlags) registerArtifacts(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.artifacts, "artifact", nil, "attach a file reference (path stored, file not read); repeatable")
	fs.StringArrayVar(&f.artifactKinds, "artifact-kind", nil, "kind of the matching --artifact (default file); repeatable, paired in order")
	fs.StringArrayVar(&f.artifactMeta, "artifact-metadata-json", nil, "JSON metadata of the matching --artifact; repeatable, paired in order")
}

// content validates the pairing of artifact flags and reads --body-file.
func (f *contentFlags) content(c *call) (spool.Content, error) {
	body, err := c.readBody(f.body, f.bodyFile)
	if err != nil {
		return spool.Content{}, err
	}
	arts, err := f.artifactInputs()
	if err != nil {
		return spool.Content{}, err
	}
	return spool.Content{Summary: f.summary, Body: body, PayloadJSON: f.payload, Artifacts: arts, IdempotencyKey: f.key}, nil
}

func (f *contentFlags) artifactInputs() ([]spool.ArtifactInput, error) {
	if len(f.artifactKinds) > len(f.artifacts) {
		return nil, usagef("artifact-kind", "--artifact-kind given %d times but --artifact only %d: they pair in order", len(f.artifactKinds), len(f.artifacts))
	}
	if len(f.artifactMeta) > len(f.artifacts) {
		return nil, usagef("artifact-metadata-json", "--artifact-metadata-json given %d times but --artifact only %d: they pair in order", len(f.artifactMeta), len(f.artifacts))
	}
	var out []spool.ArtifactInput
	for i, p := range f.artifacts {
		a := spool.ArtifactInput{Path: p}
		if i < len(f.artifactKinds) {
			a.Kind = f.artifactKinds[i]
		}
		if i < len(f.artifactMeta) {
			a.MetadataJSON = f.artifactMeta[i]
		}
		out = append(out, a)
	}
	return out, nil
}
