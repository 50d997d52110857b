module xferlab/go-http

go 1.19
