/* Paged KV cache and steps: KvCache and Step (see vkattn.i). */
