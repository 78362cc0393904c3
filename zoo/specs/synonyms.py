"""The names other libraries (transformers' configs and Trainer, fairseq, nanoGPT, torch) give the
spec's fields: an unknown key that is one of them is refused with the zoo's field as the suggestion."""

MODEL_SYNONYMS: dict[str, str] = {
    "n_layers": "'n_encoder_layers' and 'n_decoder_layers'", "num_layers": "'n_encoder_layers' and 'n_decoder_layers'",
    "num_hidden_layers": "'n_encoder_layers' or 'n_decoder_layers'", "n_layer": "'n_decoder_layers'",
    "num_heads": "'n_heads'", "nhead": "'n_heads'", "n_head": "'n_heads'", "num_attention_heads": "'n_heads'",
    "num_key_value_heads": "'n_kv_heads'", "hidden_size": "'d_model'", "dim": "'d_model'", "n_embd": "'d_model'",
    "dim_feedforward": "'d_ff'", "intermediate_size": "'d_ff'", "d_inner": "'d_ff'", "head_dim": "'head_width'",
    "dim_head": "'head_width'", "max_seq_len": "'max_len'", "max_position_embeddings": "'max_len'",
    "block_size": "'max_len'", "causal": "kind: 'decoder'", "activation": "'ffn'",
}

TRAIN_SYNONYMS: dict[str, str] = {
    "lr": "'optimizer.lr'", "learning_rate": "'optimizer.lr'", "weight_decay": "'optimizer.weight_decay'",
    "optim": "'optimizer.name'", "max_steps": "'steps'", "num_train_steps": "'steps'", "max_update": "'steps'",
    "per_device_train_batch_size": "'batch_size'", "train_batch_size": "'batch_size'", "max_tokens": "'batch_tokens'",
    "lr_scheduler_type": "'schedule'", "lr_scheduler": "'schedule'", "warmup": "'warmup_steps'",
    "warmup_updates": "'warmup_steps'", "max_grad_norm": "'grad_clip'", "clip_norm": "'grad_clip'",
    "clip_grad_norm": "'grad_clip'", "seed_value": "'seed'", "gradient_accumulation_steps": "'accumulate'",
    "update_freq": "'accumulate'", "accumulate_grad_batches": "'accumulate'",
    "early_stopping_patience": "'early_stop.patience'", "patience": "'early_stop.patience'",
    "metric_for_best_model": "'keep_best'", "load_best_model_at_end": "'keep_best'",
    "best_checkpoint_metric": "'keep_best'", "average_checkpoints": "'average_last'",
    "max_iters": "'steps'", "num_train_epochs": "'steps' (the zoo counts steps, not epochs)",
    "save_steps": "'checkpoint_every'", "save_interval_updates": "'checkpoint_every'",
    "eval_steps": "'eval_every'", "eval_interval": "'eval_every'", "logging_steps": "'log_every'",
    "log_interval": "'log_every'", "warmup_iters": "'warmup_steps'", "adam_beta1": "'optimizer.betas'",
    "adam_beta2": "'optimizer.betas'", "adam_betas": "'optimizer.betas'", "adam_epsilon": "'optimizer.eps'",
    "adam_eps": "'optimizer.eps'", "fp16": "'precision'", "bf16": "'precision'", "torch_compile": "'compile'",
    "output_dir": "'out_dir'", "save_dir": "'out_dir'", "fsdp": "'parallel' (fsdp)", "ddp": "'parallel' (ddp)",
    "gradient_checkpointing": "'activation_checkpointing'", "activation_checkpoint": "'activation_checkpointing'",
}
