"""The Hugging Face Hub, read: `resolver` turns a model source into an artifact proposal through
`huggingface_hub`, and `token` finds the Hub token a plane was given. What a proposal is and how a
config's facts are parsed is the domain's (wingsmith/domain/hub/)."""
