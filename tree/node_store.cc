// The pack-file node store: being written (issue 3).
