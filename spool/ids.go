package spool
