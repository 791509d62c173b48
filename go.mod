module github.com/inbox-dev/inbox

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/fsnotify/fsnotify v1.10.1
	github.com/gofrs/flock v0.13.1
	github.com/google/renameio/v2 v2.0.2
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/pflag v1.0.10
	golang.org/x/sys v0.49.0
)

require golang.org/x/tools v0.26.0 // indirect
