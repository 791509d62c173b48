package daemon

// SetHook sets the function called at the moments a test may act at
// (nil: none): "arm", between identifying the intake directory and arming
// its watch; "list", between arming it and listing the directory;
// "finish", between a batch's renames and the fsync of their directory.
// It may be called from more than one goroutine.
func SetHook(f func(at string)) { hook = f }
