// Test-then-train loop of a MOA multi-target learner inside the JVM, for bench_isoup.py.
//
// Usage: java -cp moa.jar:. IsoupMoaLoop <file.arff> <n_targets> <learner CLI> <repeats> <rank_every>
// The rows are read into memory first; every repeat builds a fresh learner and times only
// the loop (prediction, then training, per row), so the JVM's JIT is warm after the first.
// With rank_every > 0, every rank_every rows the feature scores of every ISOUPTreeRF member
// of an OzaBagML ensemble are computed (MOA's symbolic ranking). Prints one line per repeat:
// seconds, then the MAE of every target.

import com.yahoo.labs.samoa.instances.Instance;
import com.yahoo.labs.samoa.instances.MultiLabelInstance;
import com.yahoo.labs.samoa.instances.Prediction;
import java.util.ArrayList;
import java.util.List;
import moa.classifiers.Classifier;
import moa.classifiers.MultiLabelLearner;
import moa.classifiers.meta.OzaBag;
import moa.classifiers.multilabel.trees.ISOUPTreeRF;
import moa.options.ClassOption;
import moa.streams.MultiTargetArffFileStream;

public class IsoupMoaLoop {
    public static void main(String[] args) throws Exception {
        String file = args[0];
        int m = Integer.parseInt(args[1]);
        String cli = args[2];
        int repeats = Integer.parseInt(args[3]);
        int rankEvery = Integer.parseInt(args[4]);
        MultiTargetArffFileStream stream = new MultiTargetArffFileStream();
        stream.arffFileOption.setValue(file);
        stream.outputAttributesOption.setValueViaCLIString("-" + m);
        stream.prepareForUse();
        List<Instance> rows = new ArrayList<>();
        while (stream.hasMoreInstances()) {
            rows.add(stream.nextInstance().getData());
        }
        for (int r = 0; r < repeats; r++) {
            MultiLabelLearner learner =
                (MultiLabelLearner) ClassOption.cliStringToObject(cli, MultiLabelLearner.class, null);
            learner.prepareForUse();
            learner.resetLearning();  // creates the learner's Random, which its perceptrons use
            learner.setModelContext(stream.getHeader());
            if (learner instanceof OzaBag) {
                // the members are copies made at reset: give each the header (and a Random)
                for (Classifier c : ((OzaBag) learner).getSubClassifiers()) {
                    c.resetLearning();
                    c.setModelContext(stream.getHeader());
                }
            }
            double[] abs = new double[m];
            double checksum = 0.0;
            long t0 = System.nanoTime();
            int i = 0;
            for (Instance inst : rows) {
                MultiLabelInstance mi = (MultiLabelInstance) inst;
                Prediction p = learner.getPredictionForInstance(mi);
                for (int j = 0; j < m; j++) {
                    double v = 0.0;
                    if (p != null && p.numOutputAttributes() > j) {
                        double[] votes = p.getVotes(j);
                        // a regression vote sits at the last index of the vote array (MultiLabelPrediction)
                        if (votes != null && votes.length > 0) v = votes[votes.length - 1];
                    }
                    abs[j] += Math.abs(mi.valueOutputAttribute(j) - v);
                }
                learner.trainOnInstance(mi);
                i++;
                if (rankEvery > 0 && i % rankEvery == 0 && learner instanceof OzaBag) {
                    for (Classifier c : ((OzaBag) learner).getSubClassifiers()) {
                        checksum += ((ISOUPTreeRF) c).getFeatureScores().sumOfValues();
                    }
                }
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            StringBuilder sb = new StringBuilder();
            sb.append(secs);
            for (int j = 0; j < m; j++) sb.append(' ').append(abs[j] / rows.size());
            System.out.println(sb + " " + checksum);
        }
    }
}
