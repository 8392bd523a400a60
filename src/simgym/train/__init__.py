"""World-model training recipes (the ``train`` extra: torch, transformers, TRL, peft, gguf).

- :mod:`simgym.train.base`: the base model, from a GGUF file (converted once, cached) or
  a Hugging Face folder;
- :mod:`simgym.train.sft_data`: SFT JSONL rows to a prompt-completion dataset, fitted to a
  token budget by dropping the oldest turns;
- :mod:`simgym.train.sft`: supervised fine-tuning with TRL, LoRA or full, checkpoints,
  resume, a loss log (``simgym train sft``);
- :mod:`simgym.train.gguf_export`: trained weights back to GGUF for the ``local`` backend
  (``simgym train export-gguf``), and :mod:`simgym.train.verify`, which checks that
  llama.cpp decodes the file greedily as transformers decodes the model;
- :mod:`simgym.train.speed`: training tokens per second on this machine
  (``simgym train speed``).

Importing this package imports none of the heavy libraries; its modules do.
"""
