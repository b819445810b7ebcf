import numpy as np
import pytest

from eor import Encoder


def test_hf_encoder_mean_pools_and_normalizes(encoder_dir):
    encoder = Encoder(encoder_dir)
    assert encoder.sentence_transformer is None
    vectors = encoder.encode(["paris is the capital", "berlin", "rome is famous"])
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # Padding must not change a text's vector: encoding alone equals encoding in a padded batch.
    np.testing.assert_allclose(encoder.encode(["berlin"])[0], vectors[1], atol=1e-5)


def test_cls_pooling_differs_from_mean(encoder_dir):
    mean, cls = (
        Encoder(encoder_dir).encode(["paris is big"]),
        Encoder(encoder_dir, pooling="cls").encode(["paris is big"]),
    )
    assert not np.allclose(mean, cls)
    with pytest.raises(ValueError, match="pooling"):
        Encoder(encoder_dir, pooling="max")


def test_sentence_transformers_folder_matches_hf_mean_pooling(encoder_dir, sentence_transformer_dir):
    encoder = Encoder(sentence_transformer_dir)
    assert encoder.sentence_transformer is not None
    texts = ["paris is the capital of france", "nile"]
    np.testing.assert_allclose(encoder.encode(texts), Encoder(encoder_dir).encode(texts), atol=1e-4)
