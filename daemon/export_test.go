package daemon

// SetArmHook sets the function run in the middle of arming the intake
// watch (nil: none), for tests that swap the directory just then.
func SetArmHook(f func()) { armHook = f }
