"""One construct per capability (storage, functions, api), composed by a thin stack."""
