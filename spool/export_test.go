package spool

// AfterCheck lets black-box tests run code in the window between a
// waiter's unsuccessful check and its blocking wait.
func AfterCheck(opt *WaitOptions, f func()) { opt.afterCheck = f }
